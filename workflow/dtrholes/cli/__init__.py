"""The `dtr-holes` command line: one entry point, the user commands (`user`), the pipeline's steps
(`steps`) and what both share (`shared`). May import: every package of dtrholes."""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Sequence
from typing import NoReturn

from dtrholes.cli import shared, steps, user
from dtrholes.core import processes
from simulator import UserError


class _Parser(argparse.ArgumentParser):
    """A bad option is one line naming it (argparse prints the usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


DESCRIPTION = """Feasibility holes of DTR-family eviction policies: replay a trace under a budget,
explain why one budget fails where another completes, map a budget range exactly."""


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="dtr-holes", description=DESCRIPTION, formatter_class=shared.Help)
    p.add_argument(
        "--exit-with-parent",
        type=int,
        metavar="PID",
        help="stop when process PID, the one that started this one, exits (the workflow's jobs)",
    )
    sub = p.add_subparsers(title="commands", dest="command", required=True, metavar="command")
    user.add(sub)
    steps.add(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.exit_with_parent is not None:
        processes.exit_with_parent(args.exit_with_parent)
    if isinstance(sys.stdout, io.TextIOWrapper):  # progress reaches a log file line by line
        sys.stdout.reconfigure(line_buffering=True)
    try:
        status = args.run(args) or 0
    except UserError as exc:
        print(f"dtr-holes: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into a reader that stopped early, e.g. `head`
        sys.stderr.close()
        return 0
    except OSError as exc:  # a file that cannot be read or written: named, without a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"dtr-holes: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the records written so far stay; a rerun resumes after them
        print("dtr-holes: interrupted", file=sys.stderr)
        return 130
    return status
