"""The allocator model against torch.cuda's own caching allocator, on a trace's allocations.

Replays the allocations and frees simrd's eager runtime makes on a trace with no budget
(`simulator.allocator.allocation_sequence`) through the model and, where CUDA is available,
through PyTorch (`torch.empty(n, dtype=torch.uint8, device="cuda")`, a reference dropped to
free; `--capacity` as `torch.cuda.set_per_process_memory_fraction`), and prints both side by
side: the allocated and reserved bytes and the segments at the peak of the allocated bytes, at
the end, the first allocation that fails under the capacity, and the first step at which the
two differ. Without CUDA (or torch) it prints the model's side. Exit status 1 when they differ.

    python benchmarks/gpu_allocator_check.py --trace resnet32 --capacity 10000000000
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

import numpy as np

from dtrholes.traces import fetch
from simulator.allocator import (
    ALLOC_STEP,
    AllocationSequence,
    SequenceReplay,
    allocation_sequence,
    replay,
)

# What today's PyTorch does differently from the model (PyTorch 1.7's rules), at its defaults
# and with the settings that change them; printed with the GPU's side (docs/runtime.md).
EXPECTED = (
    "capacity: PyTorch caps the reserved bytes at int(fraction x device memory), as the model"
    " does; PyTorch 1.7 had no cap: its cudaMalloc failed when the device ran out",
    "ties: of two free blocks of one size PyTorch takes the lower device address, the model"
    " the older segment; the layouts, and then the counters, can part there",
    "off by default, each changing the rules: expandable_segments, max_split_size_mb,"
    " roundup_power2_divisions, garbage_collection_threshold, backend:cudaMallocAsync",
)
STEP_ROWS = ("allocated", "reserved", "segments")


@dataclass(frozen=True)
class GpuRun:
    """The same sequence through torch.cuda: after each step, the allocated and reserved bytes
    and the segments (`trajectory`, as the model's), and the allocation that failed."""

    trajectory: np.ndarray
    failed_step: int | None
    capacity: int | None  # the reserved bytes PyTorch allowed, from the fraction it was given
    torch_version: str
    notes: tuple[str, ...]  # this machine's settings that change the allocator's rules


def gpu_unavailable() -> str | None:
    """Why the GPU's side cannot run here, or None."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    return None if torch.cuda.is_available() else "CUDA is not available"


def run_on_gpu(sequence: AllocationSequence, capacity: int | None) -> GpuRun:
    import torch

    cuda = torch.cuda
    cuda.empty_cache()
    if cuda.memory_allocated() or cuda.memory_reserved():
        raise SystemExit("the CUDA caching allocator already holds memory: run in a new process")
    allowed = None
    if capacity is not None:
        total = cuda.get_device_properties(0).total_memory
        cuda.set_per_process_memory_fraction(min(1.0, capacity / total))
        allowed = int(min(1.0, capacity / total) * total)  # PyTorch's own arithmetic
    trajectory = np.zeros((3, len(sequence)), dtype=np.int64)
    held, failed = {}, None
    try:
        for i, (kind, arg) in enumerate(
            zip(sequence.kind.tolist(), sequence.arg.tolist(), strict=True)
        ):
            if kind == ALLOC_STEP:
                try:
                    held[i] = torch.empty(arg, dtype=torch.uint8, device="cuda")
                except cuda.OutOfMemoryError:
                    failed = i
            else:
                del held[arg]
            stats = cuda.memory_stats()
            trajectory[:, i] = [stats.get(f"{k}.all.current", 0) for k in _STAT_KEYS]
            if failed is not None:
                break
    finally:
        held.clear()
        cuda.empty_cache()
        cuda.set_per_process_memory_fraction(1.0)
    steps = len(sequence) if failed is None else failed + 1
    return GpuRun(trajectory[:, :steps], failed, allowed, torch.__version__, _settings(torch))


_STAT_KEYS = ("allocated_bytes", "reserved_bytes", "segment")


def _settings(torch) -> tuple[str, ...]:
    notes = []
    backend = getattr(torch.cuda, "get_allocator_backend", lambda: "native")()
    if backend != "native":
        notes.append(f"the allocator backend is {backend}, not the caching allocator")
    if os.environ.get("PYTORCH_CUDA_ALLOC_CONF"):
        notes.append(f"PYTORCH_CUDA_ALLOC_CONF={os.environ['PYTORCH_CUDA_ALLOC_CONF']}")
    return tuple(notes)


def first_difference(model: SequenceReplay, gpu: GpuRun) -> int | None:
    """The first step after which the two differ in allocated or reserved bytes or segments
    (or in how far they got), or None."""
    n = min(model.trajectory.shape[1], gpu.trajectory.shape[1])
    differs = np.flatnonzero((model.trajectory[:, :n] != gpu.trajectory[:, :n]).any(axis=0))
    if len(differs):
        return int(differs[0])
    return None if model.trajectory.shape == gpu.trajectory.shape else n


def _at(trajectory: np.ndarray, step: int, row: int) -> str:
    return f"{int(trajectory[row, step]):,}" if 0 <= step < trajectory.shape[1] else "-"


def table(sequence: AllocationSequence, model: SequenceReplay, gpu: GpuRun | None) -> list[str]:
    """The side-by-side rows: the model's column, and the GPU's or dashes."""
    gpu_peak = int(np.argmax(gpu.trajectory[0])) if gpu and gpu.trajectory.size else -1
    gpu_t = gpu.trajectory if gpu else np.zeros((3, 0), np.int64)

    def failure(step, nbytes) -> str:
        return "none" if step is None else f"step {step} ({nbytes:,} bytes)"

    gpu_failed = "-"
    if gpu:
        step = gpu.failed_step
        gpu_failed = failure(step, None if step is None else int(sequence.arg[step]))
    rows = [
        ("peak step", f"{model.peak_step}", f"{gpu_peak}" if gpu else "-"),
        ("allocated at the peak", f"{model.at_peak.allocated:,}", _at(gpu_t, gpu_peak, 0)),
        ("reserved at the peak", f"{model.at_peak.reserved:,}", _at(gpu_t, gpu_peak, 1)),
        ("segments at the peak", f"{model.at_peak.segments:,}", _at(gpu_t, gpu_peak, 2)),
        ("peak reserved", f"{model.final.peak_reserved:,}", _peak(gpu_t, 1)),
        ("segments at the end", f"{model.final.segments:,}", _at(gpu_t, gpu_t.shape[1] - 1, 2)),
        ("first failing allocation", failure(model.failed_step, model.failed_bytes), gpu_failed),
        ("largest free at the peak", f"{model.at_peak.largest_free:,}", "(model only)"),
        ("fragmentation at the peak", f"{model.at_peak.fragmentation:.3f}", "(model only)"),
    ]
    width = max(len(r[1]) for r in rows) + 2
    lines = [f"{'':27}{'model':>{width}}  {'GPU'}"]
    lines += [f"{name:27}{ours:>{width}}  {theirs}" for name, ours, theirs in rows]
    return lines


def _peak(trajectory: np.ndarray, row: int) -> str:
    return f"{int(trajectory[row].max()):,}" if trajectory.shape[1] else "-"


def report(name: str, sequence, capacity, model: SequenceReplay, gpu, why_not) -> list[str]:
    limit = "no capacity" if capacity is None else f"capacity {capacity:,} bytes"
    head = f"{name}: {len(sequence):,} steps, {sequence.allocations:,} allocations, {limit}"
    lines = [head, *table(sequence, model, gpu)]
    if gpu is None:
        return [*lines, f"GPU: not run ({why_not})"]
    differs = first_difference(model, gpu)
    if differs is None:
        lines.append("first step that differs: none")
    else:
        model_row = ", ".join(_at(model.trajectory, differs, r) for r in range(3))
        gpu_row = ", ".join(_at(gpu.trajectory, differs, r) for r in range(3))
        lines.append(f"first step that differs: {differs} ({'/'.join(STEP_ROWS)}: model")
        lines[-1] += f" {model_row}; GPU {gpu_row})"
    lines.append(f"torch {gpu.torch_version}; expected differences from the model:")
    return lines + [f"  - {note}" for note in (*gpu.notes, *EXPECTED)]


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", required=True, help="a trace's name in the sheet, or a .log file")
    p.add_argument("--capacity", type=_capacity, help="bytes the allocator may reserve")
    p.add_argument("--model-only", action="store_true", help="do not run the GPU's side")
    return p.parse_args(argv)


def _capacity(text: str) -> int:
    value = int(text)
    if not 0 < value < 2**62:
        raise argparse.ArgumentTypeError(f"expected bytes from 1 to 2**62 - 1, found {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    trace = fetch.load_trace(args.trace, fetch.default_data_dir())
    sequence = allocation_sequence(trace)
    why_not = "--model-only" if args.model_only else gpu_unavailable()
    gpu = None if why_not else run_on_gpu(sequence, args.capacity)
    capacity = gpu.capacity if gpu else args.capacity
    model = replay(sequence, capacity)
    print("\n".join(report(trace.name, sequence, capacity, model, gpu, why_not)))
    return 1 if gpu and first_difference(model, gpu) is not None else 0


if __name__ == "__main__":
    sys.exit(main())
