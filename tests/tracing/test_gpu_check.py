"""benchmarks/gpu_allocator_check.py: the model's side as docs/runtime.md shows it, its arguments,
the GPU's side run on a stand-in torch whose allocator is the model (so that it agrees, and a
changed rule shows), and, on a machine with CUDA, the real thing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from dtrholes.traces import fetch
from simulator.allocator import CAPACITY, NO_BLOCK, CachingAllocator, OutOfMemory
from tests.simulator.test_allocator import HAND
from tests.support.scenario import REPO

SCRIPT = REPO / "benchmarks" / "gpu_allocator_check.py"
DOC = REPO / "docs" / "runtime.md"
SHOWN = ".venv/bin/python benchmarks/gpu_allocator_check.py --trace resnet32"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_allocator_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


check = _load()


@pytest.fixture
def hand_log(tmp_path: Path) -> str:
    path = tmp_path / "hand.log"
    path.write_text(HAND, encoding="utf-8")
    return str(path)


def _output_shown() -> list[str]:
    """The indented block docs/runtime.md shows after the command, without its indent."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    i = lines.index("    " + SHOWN) + 1
    while not lines[i].startswith("    "):
        i += 1
    block = []
    while i < len(lines) and lines[i].startswith("    "):
        block.append(lines[i][4:])
        i += 1
    return block


def test_without_cuda_it_prints_the_models_side_as_the_docs_show(archive, monkeypatch, capsys):
    monkeypatch.setenv(fetch.DATA_ENV, str(archive.parent))
    monkeypatch.setattr(check, "gpu_unavailable", lambda: "CUDA is not available")
    assert check.main(SHOWN.split()[2:]) == 0
    assert capsys.readouterr().out.splitlines() == _output_shown()


def test_with_a_capacity_the_model_names_the_allocation_that_fails(hand_log, capsys):
    # HAND's allocations reserve a 2 MiB small segment, then a 20 MiB one for a's 3 MiB.
    assert check.main(["--trace", hand_log, "--capacity", str(21 << 20), "--model-only"]) == 0
    out = capsys.readouterr().out
    assert "hand: 8 steps, 5 allocations, capacity 22,020,096 bytes" in out
    assert "first failing allocation step 1 (3,145,728 bytes) -" in " ".join(out.split())
    assert out.rstrip().endswith("GPU: not run (--model-only)")


@pytest.mark.parametrize("capacity", ["0", "-1", "1e9", str(2**62)])
def test_a_capacity_that_is_not_a_number_of_bytes_is_refused(capacity, hand_log, capsys):
    with pytest.raises(SystemExit) as stop:
        check.main(["--trace", hand_log, "--capacity", capacity])
    assert stop.value.code == 2
    assert "--capacity" in capsys.readouterr().err


def test_a_trace_is_required(capsys):
    with pytest.raises(SystemExit) as stop:
        check.main([])
    assert stop.value.code == 2
    assert "--trace" in capsys.readouterr().err


# ---------------------------------------------------------------- the GPU's side, stood in for
class FakeCuda:
    """torch.cuda as the script uses it, its allocator the model (adding `extra` bytes to each
    request, to stand for a rule that differs)."""

    class OutOfMemoryError(RuntimeError):
        pass

    def __init__(self, total: int, extra: int = 0):
        self.total, self.extra = total, extra
        self.allocator = CachingAllocator()

    def is_available(self) -> bool:
        return True

    def empty_cache(self) -> None:
        self.allocator.empty_cache()

    def memory_allocated(self) -> int:
        return self.allocator.stats().allocated

    def memory_reserved(self) -> int:
        return self.allocator.stats().reserved

    def get_device_properties(self, device: int):
        return SimpleNamespace(total_memory=self.total)

    def set_per_process_memory_fraction(self, fraction: float) -> None:
        self.allocator.set_capacity(int(fraction * self.total))

    def memory_stats(self) -> dict[str, int]:
        s = self.allocator.stats()
        return {
            "allocated_bytes.all.current": s.allocated,
            "reserved_bytes.all.current": s.reserved,
            "segment.all.current": s.segments,
        }


class FakeTensor:
    def __init__(self, cuda: FakeCuda, nbytes: int):
        self.cuda, self.handle = cuda, NO_BLOCK
        try:
            self.handle = cuda.allocator.malloc(nbytes + cuda.extra if nbytes else 0)
        except OutOfMemory:
            raise cuda.OutOfMemoryError("CUDA out of memory") from None

    def __del__(self) -> None:
        self.cuda.allocator.free(self.handle)


def fake_torch(monkeypatch, extra: int = 0) -> FakeCuda:
    cuda = FakeCuda(16 << 30, extra)
    torch = SimpleNamespace(
        cuda=cuda,
        uint8="uint8",
        __version__="0+stand-in",
        empty=lambda n, dtype, device: FakeTensor(cuda, n),
    )
    monkeypatch.setitem(sys.modules, "torch", torch)
    return cuda


def test_the_gpus_side_agrees_with_an_allocator_that_is_the_model(monkeypatch, hand_log, capsys):
    fake_torch(monkeypatch)
    assert check.main(["--trace", hand_log]) == 0
    out = capsys.readouterr().out
    assert "allocated at the peak 9,439,232 9,439,232" in " ".join(out.split())
    assert "first step that differs: none" in out
    assert "torch 0+stand-in; expected differences from the model:" in out
    assert all(f"  - {note}" in out for note in check.EXPECTED)


def test_under_a_capacity_both_sides_fail_at_the_same_allocation(monkeypatch, archive, capsys):
    monkeypatch.setenv(fetch.DATA_ENV, str(archive.parent))
    cuda = fake_torch(monkeypatch)
    assert check.main(["--trace", "resnet32", "--capacity", "10000000000"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    allowed = int(10_000_000_000 / cuda.total * cuda.total)  # PyTorch's own arithmetic
    assert f"capacity {allowed:,} bytes" in out
    assert "first failing allocation step 435 (44,957,696 bytes) step 435 (44,957,696 bytes)" in out
    assert cuda.allocator.stats().allocated == 0  # the run let go of everything it held
    assert cuda.allocator.state.g[CAPACITY] == cuda.total  # and restored the whole device


def test_a_rule_that_differs_shows_at_the_first_step_it_changes(monkeypatch, hand_log, capsys):
    fake_torch(monkeypatch, extra=512)  # w's 1,000 bytes take 1,536, not 1,024
    assert check.main(["--trace", hand_log]) == 1
    out = capsys.readouterr().out
    assert (
        "first step that differs: 0 (allocated/reserved/segments: model 1,024, 2,097,152, 1;"
        " GPU 1,536, 2,097,152, 1)"
    ) in out


def test_settings_that_change_the_rules_are_named(monkeypatch, hand_log, capsys):
    cuda = fake_torch(monkeypatch)
    cuda.get_allocator_backend = lambda: "cudaMallocAsync"
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    check.main(["--trace", hand_log])
    out = capsys.readouterr().out
    assert "  - the allocator backend is cudaMallocAsync, not the caching allocator" in out
    assert "  - PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in out


# ---------------------------------------------------------------- the real thing
def test_on_a_gpu_the_model_and_torch_agree(hand_log, capsys):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here")
    code = check.main(["--trace", hand_log])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "first step that differs: none" in out
