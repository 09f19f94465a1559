"""Processes that do not outlive the process that started them."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # prctl(2)


def exit_with_parent(parent: int) -> None:
    """Ask the kernel to send SIGTERM to this process when its parent exits (Linux; elsewhere
    nothing). A pipeline job killed with its Snakemake, or a worker with its job, then stops at
    once instead of computing for nobody; its records are written atomically, so nothing is
    lost. `parent`: the parent's pid, to stop at once if it exited before this call."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        return  # not allowed here (a sandbox): the job then runs on as before
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)
