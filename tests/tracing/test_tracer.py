"""`dtr-holes trace-torch`: traces of PyTorch training steps that the simulator replays, whose
memory agrees with PyTorch's own allocator and whose shapes agree with DTR's published trace."""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path

import pytest

from dtrholes.cli import main
from dtrholes.traces import pytorch
from simulator import budget_for, peak_memory, simulate
from simulator.trace import parse_trace, provenance, read_trace
from tests.support.archive import entry

torch = pytest.importorskip("torch", reason=pytorch.EXTRA_MISSING)
profiler = pytest.importorskip("torch.profiler", reason=pytorch.EXTRA_MISSING)

MODELS = Path(__file__).with_name("models.py")
FLOPS = pytorch.CostModel("flops")


def factory(name: str) -> str:
    return f"{MODELS}:{name}"


def allocator_peak(run) -> tuple[object, int]:
    """`run()`'s result and the peak of bytes held in PyTorch's CPU allocator while it ran, from
    the profiler's memory events (allocations and frees, in order) - not from the tracer."""
    with profiler.profile(activities=[profiler.ProfilerActivity.CPU], profile_memory=True) as p:
        value = run()
    events = [e for e in p.profiler.kineto_results.events() if e.name() == "[memory]"]
    assert events, "the profiler recorded no memory events"
    held = peak = 0
    for e in sorted(events, key=lambda e: (e.start_ns(), e.correlation_id())):
        held += e.nbytes()
        peak = max(peak, held)
    return value, peak


@pytest.mark.parametrize("model", ["mlp", "attention"])
def test_peak_equals_the_allocators_peak(model):
    # The whole trace_step runs under the profiler: the factory's parameters and inputs are
    # allocated inside it, so the allocator's peak counts them as the trace's constants do.
    text, peak = allocator_peak(lambda: pytorch.trace_step(factory(model), FLOPS))
    trace = parse_trace(text.encode(), model)
    assert peak_memory(trace) == peak


def test_resnet32_activations_match_the_published_trace(archive):
    """CIFAR ResNet-32 at the published trace's shapes (batch 56, 224x224): the forward pass
    allocates the same activations in the same order. Smaller fresh outputs differ by design:
    cuDNN's batch norm returns a 0-byte reserve, the CPU kernel none; DTR's PyTorch logged the
    running statistics' counter as an `add`, ours writes it in place (a MUTATE)."""
    ours = pytorch.trace_step(factory("resnet32"), FLOPS, fake=True)
    with zipfile.ZipFile(archive) as z:
        published = z.read(entry("resnet32").member).decode()
    mine, theirs = forward_activations(ours), forward_activations(published)
    assert mine[0] == 179_830_784 == 56 * 16 * 224 * 224 * 4
    assert len(mine) == 111
    assert mine == theirs
    read = parse_trace(ours.encode(), "resnet32")
    result = simulate(read, budget_for(read, 0.5), "dtr")
    assert result.outcome == "ok"


def forward_activations(text: str, at_least: int = 4096) -> list[int]:
    """Bytes of each fresh operator output of at least `at_least` bytes before BACKWARD."""
    sizes, pending = [], {}
    for line in text.splitlines():
        obj = json.loads(line)
        kind = obj["INSTRUCTION"]
        if kind == "ANNOTATE" and obj["ANNOTATION"] == "BACKWARD":
            break
        if kind == "CALL":
            pending.update(dict.fromkeys(obj["RESULT"]))
        elif kind == "MEMORY" and obj["NAME"] in pending:
            pending[obj["NAME"]] = int(obj["MEMORY"])
        elif kind == "ALIAS" and obj["NAME"] in pending and int(obj["ALIAS"]) == -1:
            sizes.append(pending[obj["NAME"]])
    return [size for size in sizes if size >= at_least]


@pytest.mark.parametrize("model", ["mlp", "attention"])
def test_fake_mode_records_what_a_real_step_does(model):
    """Shapes, aliasing, writes and frees under FakeTensorMode are those of the real step: with
    costs from shapes, the traces are equal below their provenance line."""
    real = pytorch.trace_step(factory(model), FLOPS, optimizer="sgd")
    fake = pytorch.trace_step(factory(model), FLOPS, optimizer="sgd", fake=True)
    assert real.split("\n", 1)[1] == fake.split("\n", 1)[1]


def test_same_model_same_bytes():
    a = pytorch.trace_step(factory("attention"), FLOPS, optimizer="adam", seed=3)
    b = pytorch.trace_step(factory("attention"), FLOPS, optimizer="adam", seed=3)
    assert a == b


def test_provenance_heads_the_trace():
    costs = pytorch.CostModel("roofline", gpu="a100")
    text = pytorch.trace_step(factory("mlp"), costs, optimizer="sgd")
    header = json.loads(text.split("\n", 1)[0])
    assert header["ANNOTATION"] == "PROVENANCE"
    given = header["PROVENANCE"]
    assert given["factory"] == factory("mlp")
    assert given["torch"] == torch.__version__
    assert given["costs"]["model"] == "roofline" and given["costs"]["gpu"] == "a100"
    assert given["optimizer"] == "sgd"
    assert provenance(text.encode()) == given


def test_in_place_writes_are_mutations():
    """SGD with momentum writes each parameter in place: a MUTATE of that parameter's own
    CONSTANT name, never a new CALL result; the trace stays parseable."""
    text = pytorch.trace_step(factory("mlp"), FLOPS, optimizer="sgd")
    lines = [json.loads(x) for x in text.splitlines()]
    constants = [x["NAME"] for x in lines if x["INSTRUCTION"] == "CONSTANT"]
    written = [x["ARGS"][i] for x in lines if x["INSTRUCTION"] == "MUTATE" for i in x["MUTATE"]]
    parameters = 6  # three Linear layers' weights and biases, named first
    assert written == constants[:parameters]
    parse_trace(text.encode(), "mlp")


def test_measured_costs_are_positive_and_name_the_processor():
    costs = pytorch.CostModel("measured", repeats=3)
    text = pytorch.trace_step(factory("mlp"), costs)
    calls = [json.loads(x) for x in text.splitlines() if '"CALL"' in x]
    assert all(int(c["TIME"]) > 0 for c in calls)
    assert provenance(text.encode())["costs"]["processor"]


def test_flops_costs_follow_the_formula():
    costs = pytorch.CostModel("flops", flops_per_ns=2.0, floor_ns=7)
    text = pytorch.trace_step(factory("mlp"), costs)
    calls = [c for c in map(json.loads, text.splitlines()) if c["INSTRUCTION"] == "CALL"]
    first = {c["NAME"]: int(c["TIME"]) for c in reversed(calls)}
    assert first["tanh"] == 7  # no FLOP counter for elementwise calls: the floor
    assert first["addmm"] == 7 + (2 * 16 * 48 * 96) // 2  # 2*m*k*n FLOPs at 2 per ns


def test_cli_writes_a_trace_the_simulator_reads(tmp_path, capsys):
    out = tmp_path / "mlp.log"
    assert main(["trace-torch", "--factory", factory("mlp"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    trace = read_trace(out)
    assert f"peak memory {peak_memory(trace):,} bytes" in printed
    assert main(["simulate", "--trace", str(out), "--ratio", "0.8"]) == 0


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no_such_module:f", "expected an importable factory module"),
        (f"{MODELS}:nothing", "expected a function nothing"),
        ("nocolon", "expected module:function or file.py:function"),
        (f"{MODELS}:broken", "expected a training step that runs, found RuntimeError"),
    ],
)
def test_cli_bad_factory_is_one_line(tmp_path, capsys, spec, message):
    assert main(["trace-torch", "--factory", spec, "--out", str(tmp_path / "x.log")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.log").exists()


def test_cli_bad_cost_option_is_one_line(tmp_path, capsys):
    argv = ["trace-torch", "--factory", factory("mlp"), "--out", str(tmp_path / "x.log")]
    with pytest.raises(SystemExit) as caught:
        main([*argv, "--flops-per-ns", "nan"])
    assert caught.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "expected a finite number > 0, found 'nan'" in err and len(err.splitlines()) == 1


def test_roofline_costs_follow_the_formula():
    costs = pytorch.CostModel("roofline", gpu="v100")
    gpu = pytorch.GPUS["v100"]
    text = pytorch.trace_step(factory("mlp"), costs)
    calls = [c for c in map(json.loads, text.splitlines()) if c["INSTRUCTION"] == "CALL"]
    first = {c["NAME"]: int(c["TIME"]) for c in reversed(calls)}
    assert first["t"] == gpu.launch_ns  # a view moves no data
    flops, moved = 2 * 16 * 48 * 96, 4 * (96 + 16 * 48 + 48 * 96 + 16 * 96)  # bias, x, w.t(), out
    seconds = max(flops / gpu.flops_per_s, moved / gpu.bytes_per_s)
    assert first["addmm"] == gpu.launch_ns + math.ceil(seconds * 1e9)
