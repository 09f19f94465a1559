"""Run unmodified simrd on one trace log; print one JSON line. Args: log, budget, class, limit."""

import hashlib
import json
import math
import sys
import threading
import time

import simrd
from simrd.heuristic import HEURISTICS
from simrd.parse import parse_file
from simrd.runtime import RematExceededError, RuntimeV2EagerOptimized

# simrd rematerializes recursively; long chains need more than Python's default depth.
RECURSION_LIMIT = 1_000_000
STACK_BYTES = 1 << 30


def record_choices(heuristic, names: list) -> None:
    """Log the root tensor names of the storages that heuristic.choose() returns, unchanged."""
    choose = heuristic.choose

    def recorded(*args, **kwargs):
        chosen = choose(*args, **kwargs)
        names.extend(s.tensors[0].name for s in chosen)
        return chosen

    heuristic.choose = recorded


def run(log_path: str, budget: int, heuristic_name: str, remat_limit: float) -> dict:
    with open(log_path) as f:
        closure = parse_file(f, start=True).get_closure()
    heuristic, names = HEURISTICS[heuristic_name](), []
    record_choices(heuristic, names)
    rt = RuntimeV2EagerOptimized(budget, heuristic, remat_limit=remat_limit)
    start, outcome = time.perf_counter(), "ok"
    try:
        closure(rt)
    except MemoryError:
        outcome = "oom"
    except RematExceededError:
        outcome = "thrashed"
    summary = rt.telemetry.summary
    return {
        "outcome": outcome,
        "clock": rt.clock,
        "evictions": len(names),
        "eviction_seq_sha256": hashlib.sha256("\n".join(names).encode()).hexdigest(),
        "remat_compute": summary["remat_compute"],
        "model_compute": summary["model_compute"],
        "peak_memory": summary["max_memory"],
        "heuristic_evals": summary["heuristic_eval_count"],
        "wall_s": time.perf_counter() - start,
        "simrd_file": simrd.__file__,
    }


def main(argv: list) -> None:
    log_path, budget, heuristic_name, limit = argv
    remat_limit = math.inf if limit == "inf" else float(limit)
    box = {}
    sys.setrecursionlimit(RECURSION_LIMIT)
    threading.stack_size(STACK_BYTES)
    worker = threading.Thread(
        target=lambda: box.update(run(log_path, int(budget), heuristic_name, remat_limit))
    )
    worker.start()
    worker.join()
    if not box:
        sys.exit(1)  # the worker's exception has been printed to stderr
    print(json.dumps(box))


if __name__ == "__main__":
    main(sys.argv[1:])
