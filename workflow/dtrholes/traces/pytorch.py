"""One PyTorch training step recorded as a simrd trace (`dtr-holes trace-torch`, extra `torch`).

A `TorchDispatchMode` sees every aten call of the forward and backward pass below autograd, in
order, as DTR's patched PyTorch logged them. What each call becomes:

- a tensor that exists before the step (parameter, buffer, input) is a CONSTANT of its
  storage's size, all of them at the start: they are live the whole step;
- a call writing an argument (the schema's `(a!)`) is a MUTATE of those arguments; a call with
  outputs is a CALL whose outputs are fresh storages (MEMORY = the storage's bytes) or share an
  argument's storage (ALIAS = that argument's position); a call doing both is a CALL then a
  MUTATE of cost 0;
- a storage freed by PyTorch (its weak reference expired, checked before and after every call
  and at the end) RELEASEs every name bound to it, so memory is freed exactly when PyTorch frees
  it; what is still alive at the end (parameters, gradients, inputs) stays, as simrd pins it.

Costs (TIME, in ns), by cost model: `measured` (median wall time of `repeats` runs of the call
on this CPU), `flops` (torch.utils.flop_counter's count at `flops_per_ns`, plus `floor_ns` per
call), `roofline` (a named GPU: max of FLOPs over peak and bytes touched over bandwidth, plus its
launch time). docs/tracing.md says what each gets wrong. The first line, before ANNOTATE START,
is the provenance (factory, torch version, cost model); simrd's parser skips it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from simulator import UserError

EXTRA_MISSING = (
    "the optional `torch` extra is not installed (pip install -c requirements.lock -e '.[torch]')"
)


def require_torch():
    """torch, or one line saying how to install the extra."""
    try:
        import torch
    except ImportError:
        raise UserError("trace-torch", "PyTorch", EXTRA_MISSING) from None
    return torch


@dataclass(frozen=True)
class GPU:
    """What the roofline cost model knows of a GPU: FP32 peak, memory bandwidth, launch time."""

    flops_per_s: float
    bytes_per_s: float
    launch_ns: int


GPUS = {  # vendors' datasheet figures (dense FP32, HBM/GDDR bandwidth)
    "t4": GPU(8.1e12, 320e9, 5000),
    "v100": GPU(15.7e12, 900e9, 5000),
    "a100": GPU(19.5e12, 1555e9, 5000),
    "h100": GPU(67e12, 3350e9, 5000),
}

COST_MODELS = ("measured", "flops", "roofline")


@dataclass(frozen=True)
class CostModel:
    """How each call's TIME is obtained; recorded in the trace's provenance."""

    model: str = "flops"
    repeats: int = 5  # measured: runs per call, the median taken
    flops_per_ns: float = 10.0  # flops: throughput (10 GFLOP/s)
    floor_ns: int = 1000  # flops: every call costs at least this (launch, dispatch, memory)
    gpu: str = "v100"  # roofline

    def __post_init__(self):
        if self.model not in COST_MODELS:
            raise UserError("--cost", "one of " + ", ".join(COST_MODELS), repr(self.model))
        if self.model == "roofline" and self.gpu not in GPUS:
            raise UserError("--gpu", "one of " + ", ".join(GPUS), repr(self.gpu))
        if not (math.isfinite(self.flops_per_ns) and self.flops_per_ns > 0):
            raise UserError("--flops-per-ns", "a finite number > 0", repr(self.flops_per_ns))
        if self.repeats < 1 or self.floor_ns < 0:
            raise UserError(
                "cost model", "repeats >= 1 and floor_ns >= 0", f"{self.repeats}, {self.floor_ns}"
            )

    def describe(self) -> dict:
        used = {
            "measured": ("repeats",),
            "flops": ("flops_per_ns", "floor_ns"),
            "roofline": ("gpu",),
        }[self.model]
        out = {"model": self.model} | {k: v for k, v in asdict(self).items() if k in used}
        if self.model == "measured":
            out["processor"] = _processor()
        if self.model == "roofline":
            out |= asdict(GPUS[self.gpu])
        return out


def _processor() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


@dataclass
class _Storage:
    ref: object  # StorageWeakRef
    views: dict = field(default_factory=dict)  # (offset, shape, stride, dtype) -> current name
    names: list = field(default_factory=list)  # every name bound to it, in order


class _Recorder:
    """The trace's lines and the storages they name; `mode()` is the dispatch mode feeding it."""

    def __init__(self, torch, costs: CostModel):
        from torch.multiprocessing.reductions import StorageWeakRef
        from torch.utils.flop_counter import flop_registry

        self.torch, self.costs = torch, costs
        self.weak, self.flop_registry = StorageWeakRef, flop_registry
        self.lines: list[str] = []
        self.storages: dict[int, _Storage] = {}
        self.count = 0

    # -- lines -------------------------------------------------------------------------------

    def emit(self, **fields) -> None:
        self.lines.append(json.dumps(fields, sort_keys=True, separators=(",", ":")))

    def annotate(self, what: str) -> None:
        self.emit(INSTRUCTION="ANNOTATE", ANNOTATION=what)

    def _fresh_name(self) -> str:
        self.count += 1
        return f"x{self.count - 1}"

    # -- storages and names ------------------------------------------------------------------

    def _storage(self, t) -> tuple[int, _Storage | None]:
        ref = self.weak(t.untyped_storage())
        return ref.cdata, self.storages.get(ref.cdata)

    @staticmethod
    def _view(t) -> tuple:
        return (t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)

    def _bind(self, t, name: str) -> None:
        cdata, entry = self._storage(t)
        if entry is None:
            entry = self.storages[cdata] = _Storage(self.weak(t.untyped_storage()))
        entry.views.setdefault(self._view(t), name)  # an identical view (detach) is the same tensor
        entry.names.append(name)

    def name_of(self, t) -> str:
        """The name of an argument; a tensor never seen is a CONSTANT (its storage new) or a
        zero-cost view of a known storage (a view made outside the dispatcher)."""
        cdata, entry = self._storage(t)
        if entry is not None and (name := entry.views.get(self._view(t))) is not None:
            return name
        name = self._fresh_name()
        if entry is None:
            self.emit(INSTRUCTION="CONSTANT", NAME=name)
            self.emit(INSTRUCTION="MEMORY", NAME=name, MEMORY=str(t.untyped_storage().nbytes()))
        else:
            first = entry.names[0]
            self.emit(INSTRUCTION="CALL", NAME="view", ARGS=[first], RESULT=[name], TIME="0")
            self.emit(INSTRUCTION="MEMORY", NAME=name, MEMORY=str(_bytes(t)))
            self.emit(INSTRUCTION="ALIAS", NAME=name, ALIAS="0")
        self._bind(t, name)
        return name

    def release_dead(self) -> None:
        """RELEASE every name of each storage PyTorch has freed since the last look."""
        for cdata in [c for c, s in self.storages.items() if s.ref.expired()]:
            for name in self.storages.pop(cdata).names:
                self.emit(INSTRUCTION="RELEASE", NAME=name)

    # -- calls ---------------------------------------------------------------------------------

    def call(self, func, args: tuple, kwargs: dict):
        torch = self.torch
        self.release_dead()
        inputs, written = _tensor_arguments(torch, func, args, kwargs)
        names = [self.name_of(t) for t in inputs]
        start = time.perf_counter_ns()
        out = func(*args, **kwargs)
        elapsed = time.perf_counter_ns() - start
        outputs = [t for t in _flat(out) if isinstance(t, torch.Tensor)]
        if not outputs and not written:  # prim.device, item(): nothing the trace can hold
            return out
        in_storages = [self._storage(t)[0] for t in inputs]
        written_storages = {in_storages[i] for i in written}
        results, seen = [], set()
        for t in outputs:
            cdata, _ = self._storage(t)
            if cdata in written_storages:  # an in-place call's own argument, renamed by MUTATE
                continue
            name = self._fresh_name()
            if cdata in in_storages:
                alias, size = in_storages.index(cdata), _bytes(t)
            else:  # new memory, unless another output or a live storage holds it already
                alias = -1
                held = cdata in seen or cdata in self.storages
                size = 0 if held else t.untyped_storage().nbytes()
                seen.add(cdata)
            results.append((name, t, size, alias))
        viewing = not written and all(alias >= 0 for *_, alias in results)
        cost = self._cost(func, args, kwargs, out, inputs, outputs, elapsed, viewing)
        if results:
            outs = [r[0] for r in results]
            self.emit(
                INSTRUCTION="CALL", NAME=_op_name(func), ARGS=names, RESULT=outs, TIME=str(cost)
            )
            for name, t, size, alias in results:
                self.emit(INSTRUCTION="MEMORY", NAME=name, MEMORY=str(size))
                self.emit(INSTRUCTION="ALIAS", NAME=name, ALIAS=str(alias))
                self._bind(t, name)
        if written:
            time_ = "0" if results else str(cost)  # a CALL's own writes cost nothing more
            self.emit(
                INSTRUCTION="MUTATE", NAME=_op_name(func), ARGS=names, MUTATE=written, TIME=time_
            )
        self.release_dead()
        return out

    def _copies(self, value):
        from torch.utils._pytree import tree_map

        torch = self.torch
        return tree_map(lambda t: t.detach().clone() if isinstance(t, torch.Tensor) else t, value)

    def _cost(self, func, args, kwargs, out, inputs, outputs, elapsed, viewing) -> int:
        """The call's TIME; `viewing`: it only makes views of its arguments (no data moves)."""
        c = self.costs
        if c.model == "measured":
            runs = [elapsed]
            if c.repeats > 1 and self.torch.Tag.nondeterministic_seeded not in func.tags:
                # on copies: writes, declared or not (batch norm's statistics), touch no state
                copied_args, copied_kwargs = self._copies((args, kwargs))
                while len(runs) < c.repeats:
                    start = time.perf_counter_ns()
                    func(*copied_args, **copied_kwargs)
                    runs.append(time.perf_counter_ns() - start)
            return int(statistics.median(runs))
        counter = self.flop_registry.get(func._overloadpacket)
        flops = counter(*args, **kwargs, out_val=out) if counter is not None else 0
        if c.model == "flops":
            return c.floor_ns + math.ceil(flops / c.flops_per_ns)
        gpu = GPUS[c.gpu]
        moved = 0 if viewing else sum(_bytes(t) for t in inputs) + sum(_bytes(t) for t in outputs)
        seconds = max(flops / gpu.flops_per_s, moved / gpu.bytes_per_s)
        return gpu.launch_ns + math.ceil(seconds * 1e9)

    def mode(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return recorder.call(func, args, kwargs or {})

        return Mode()


def _flat(value) -> list:
    from torch.utils._pytree import tree_flatten

    return tree_flatten(value)[0]


def _bytes(t) -> int:
    return t.numel() * t.element_size()


def _op_name(func) -> str:
    name = func._schema.name.split("::", 1)[-1]
    return name if func._overloadname == "default" else f"{name}_{func._overloadname}"


def _tensor_arguments(torch, func, args: tuple, kwargs: dict) -> tuple[list, list[int]]:
    """The call's tensor arguments in schema order, and the positions of those it writes."""
    tensors, written = [], []
    for i, arg in enumerate(func._schema.arguments):
        value = args[i] if i < len(args) else kwargs.get(arg.name)
        writes = arg.alias_info is not None and arg.alias_info.is_write
        for t in _flat(value):
            if isinstance(t, torch.Tensor):
                if writes:
                    written.append(len(tensors))
                tensors.append(t)
    return tensors, written


# -- the user's factory -----------------------------------------------------------------------


def load_factory(spec: str) -> Callable:
    """The function `spec` names: "module:function" or "path/file.py:function"."""
    where, sep, attribute = spec.rpartition(":")
    if not sep or not where or not attribute:
        raise UserError("--factory", "module:function or file.py:function", repr(spec))
    try:
        if where.endswith(".py"):
            path = Path(where)
            if not path.is_file():
                raise UserError("--factory", "an existing Python file", repr(where))
            module_spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:  # as `python -m` would find it: the current directory first
            with _on_path(str(Path.cwd())):
                module = importlib.import_module(where)
    except UserError:
        raise
    except Exception as error:  # the user's module: any error it raises while importing
        raise UserError(spec, "an importable factory module", _one_line(error)) from None
    found = getattr(module, attribute, None)
    if not callable(found):
        raise UserError(spec, f"a function {attribute} in {where}", "none")
    return found


@contextlib.contextmanager
def _on_path(directory: str):
    sys.path.insert(0, directory)
    try:
        yield
    finally:
        sys.path.remove(directory)


def _one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"


@dataclass(frozen=True)
class Step:
    """What the factory returned: the model, its inputs, and the loss of its output."""

    model: object
    inputs: tuple
    loss: Callable


def _step(torch, made, spec: str) -> Step:
    if not isinstance(made, tuple) or len(made) not in (2, 3):
        raise UserError(spec, "a return value (model, inputs) or (model, inputs, loss)", "other")
    model, inputs = made[0], made[1]
    if not isinstance(model, torch.nn.Module):
        raise UserError(spec, "a torch.nn.Module as the first value", type(model).__name__)
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    loss = made[2] if len(made) == 3 else _sum_loss
    return Step(model, inputs, loss)


def _sum_loss(output):
    return sum(t.float().sum() for t in _flat(output) if t.is_floating_point())


OPTIMIZERS = ("none", "sgd", "adam")


def trace_step(
    factory: str,
    costs: CostModel,
    *,
    fake: bool = False,
    optimizer: str = "none",
    seed: int = 0,
) -> str:
    """The trace (text) of one training step of the model `factory` makes.

    `fake` runs it under FakeTensorMode (shapes and aliasing, no memory, no arithmetic; not with
    measured costs).
    """
    torch = require_torch()
    if fake and costs.model == "measured":
        raise UserError("--fake", "a cost model other than measured", "measured")
    if optimizer not in OPTIMIZERS:
        raise UserError("--optimizer", "one of " + ", ".join(OPTIMIZERS), repr(optimizer))
    make = load_factory(factory)
    provenance = {
        "tool": "dtr-holes trace-torch",
        "factory": factory,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "costs": costs.describe(),
        "fake": fake,
        "optimizer": optimizer,
        "seed": seed,
    }
    torch.manual_seed(seed)
    with _fake_mode(fake):
        try:
            step = _step(torch, make(), factory)
        except UserError:
            raise
        except Exception as error:
            raise UserError(factory, "a factory that runs", _one_line(error)) from None
        recorder = _Recorder(torch, costs)
        recorder.emit(INSTRUCTION="ANNOTATE", ANNOTATION="PROVENANCE", PROVENANCE=provenance)
        recorder.annotate("START")
        params = list(step.model.parameters())
        for t in [*params, *step.model.buffers(), *step.inputs]:
            if isinstance(t, torch.Tensor):
                recorder.name_of(t)
        opt = _optimizer(torch, optimizer, params)
        try:
            with recorder.mode():
                loss = step.loss(step.model(*step.inputs))
                recorder.annotate("BACKWARD")
                loss.backward()
                del loss
                if opt is not None:
                    opt.step()
        except Exception as error:  # the user's model, loss or inputs
            raise UserError(factory, "a training step that runs", _one_line(error)) from None
        recorder.release_dead()
    return "\n".join(recorder.lines) + "\n"


def _fake_mode(fake: bool):
    if not fake:
        return contextlib.nullcontext()
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode()


def _optimizer(torch, name: str, params: list):
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3)
    return None
