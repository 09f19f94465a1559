"""What the user commands and the pipeline steps share: argument types, options and writers."""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from pathlib import Path

from dtrholes.core import files
from dtrholes.explain import markdown, types
from dtrholes.holes import maps
from dtrholes.pipeline import stages
from dtrholes.study import plan, protocol
from dtrholes.traces import fetch, recost
from simulator import POLICIES, UserError


class Help(argparse.RawDescriptionHelpFormatter):
    """Help at most 100 columns wide however wide the terminal, descriptions as written."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=min(100, shutil.get_terminal_size().columns) - 2)


def param(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    try:
        if not sep:
            raise ValueError
        return name, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=NUMBER, found {text!r}") from None


def recipe(text: str) -> recost.Recipe:
    try:
        return recost.Recipe.parse(text)
    except UserError as error:
        raise argparse.ArgumentTypeError(
            f"expected {error.expected}, found {error.found}"
        ) from None


def positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, found {text!r}")
    return value


def out_file(text: str) -> Path:
    if Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"expected a file path, found the directory {text!r}")
    return Path(text)


def out_dir(text: str) -> Path:
    if Path(text).exists() and not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"expected a directory, found the file {text!r}")
    return Path(text)


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, found {text!r}")
    return int(text)


def count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, found {text!r}")
    return int(text)


def add_policy(p: argparse.ArgumentParser) -> None:
    """The options of a command that runs one policy: its name and parameters."""
    p.add_argument(
        "--policy",
        default="dtr",
        help="one of: " + ", ".join(POLICIES) + "; or file.py:name, module:name (your own)",
    )
    p.add_argument(
        "--param",
        type=param,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a policy parameter (repeatable)",
    )


def add_sheet(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sheet", type=Path, default=fetch.DEFAULT_SHEET, help="the trace sheet")


def add_job(p: argparse.ArgumentParser) -> None:
    """The options of a pipeline job: what it runs on, its protocol values, where it writes."""
    p.add_argument("--trace", required=True)
    p.add_argument("--policy", required=True)
    p.add_argument("--spec", type=json.loads, required=True, help="the job's protocol values")
    p.add_argument("--protocol", type=Path, required=True, help="protocol directory")
    p.add_argument("--baseline", type=Path, required=True, help="the trace's baseline JSON")
    p.add_argument("--data", type=Path, required=True, help="data directory with the archive")
    p.add_argument("--results", type=Path, required=True, help="results directory")
    p.add_argument("--out", type=Path, required=True, help="JSON output listing the run ids")
    add_sheet(p)


def job(args: argparse.Namespace, kind: str) -> stages.Job:
    """The job an invocation describes; its protocol values must be the current protocol's."""
    current = protocol.load(args.protocol)
    if plan.job_spec(current, kind, args.policy) != args.spec:
        raise UserError("--spec", f"the current protocol's values for a {kind} job", "others")
    baseline = json.loads(args.baseline.read_text(encoding="utf-8"))
    return stages.Job(
        args.trace,
        args.policy,
        args.spec,
        current.version,
        baseline,
        args.data,
        args.sheet,
        args.results,
    )


def progress(chunk: int, span: maps.Span):
    """Prints every 100th run's count and the share of the chunk covered so far."""
    width = span.last - span.first + 1

    def show(runs: int, covered: int) -> None:
        if runs % 100 == 0 or covered == width:
            print(f"chunk {chunk}: {runs:,} runs, {covered / width:.1%} covered", file=sys.stderr)

    return show


def write_explanations(
    found: list[types.Explanation], out: Path, suffixes: tuple[str, ...]
) -> None:
    """explain.json and explain.md in directory `out`, and a figure per pair in each format."""
    from dtrholes.report import figures  # plotting libraries load only for commands that plot

    out.mkdir(parents=True, exist_ok=True)
    written = [types.to_json(x) for x in found]
    files.write_json(out / "explain.json", written, indent=None)  # ~10 MB: C encoder, 30x faster
    text = "".join(markdown.markdown(x) + "\n" for x in found) or "No confirmed region.\n"
    files.write_text(out / "explain.md", text)
    for i, x in enumerate(found):
        figures.explanation(x, out / f"pair-{i}", suffixes=suffixes)
