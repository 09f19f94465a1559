"""Every command README.md and docs/ show: a short one runs here and prints the figures its
section states, a long one names the test that runs it at a small scale. So the docs cannot
drift from the code: a changed number fails here, in the doc or in the output."""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from dtrholes.cli import main
from dtrholes.traces import fetch
from tests.support.logs import chain_lines, write
from tests.support.scenario import REPO

DOCS = (REPO / "README.md", REPO / "config" / "README.md", *sorted((REPO / "docs").glob("*.md")))
PROGRAMS = ("dtr-holes", "snakemake", "python", "pip")  # a code line starting with one: a command


@dataclass(frozen=True)
class Shown:
    """A command as a doc shows it: the doc, its line, the section around it, the line before."""

    doc: Path
    line: int
    section: str
    command: str


def _commands(doc: Path) -> list[Shown]:
    lines = doc.read_text(encoding="utf-8").splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("#")] + [len(lines)]
    found, i = [], 0
    while i < len(lines):
        start = i
        if lines[i].startswith("    ") and not lines[i].startswith("     "):
            text = lines[i][4:]
            while text.endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text[:-1].rstrip() + " " + lines[i].strip()
            text = re.sub(r"\s+#\s.*$", "", text).strip().replace(".venv/bin/", "")
            if text.startswith(PROGRAMS):
                top = max(h for h in heads if h <= start) if heads[0] <= start else 0
                end = min(h for h in heads if h > start)
                found.append(Shown(doc, start + 1, "\n".join(lines[top:end]), text))
        i += 1
    return found


SHOWN = [shown for doc in DOCS for shown in _commands(doc)]


@dataclass(frozen=True)
class Short:
    """A command run here, and the figures its section states that its output must print."""

    figures: tuple[str, ...] = ()
    cwd: str = "empty"  # empty: a new directory; results: a copy of the scenario run to the end
    files: tuple[str, ...] = ()  # what the command reads: my-trace.log, a file the doc shows
    torch: bool = False
    before: str = ""  # a command the doc shows before it, whose output it reads


R32_V100 = (
    "dtr-holes trace-torch --factory tests/tracing/models.py:resnet32 --fake --cost roofline "
    "--gpu v100 --out r32-v100.log"
)
SHORT = {
    "dtr-holes simulate --trace resnet32 --ratio 0.104 --policy dtr": Short(),
    "dtr-holes simulate --trace unet --budget 3366305856 --json": Short(),
    "dtr-holes simulate --trace my-trace.log --ratio 0.3 --policy lru --cap 60": Short(
        files=("my-trace.log",)
    ),
    "dtr-holes edge --trace resnet32 --low 0.101 --high 0.102": Short(
        ("1,024,657,199", "1,024,657,200", "8 runs")
    ),
    "dtr-holes explain --trace resnet32 --ok 0.101 --fail 0.104": Short(),
    "dtr-holes explain --trace resnet32 --ok 0.101 --fail 0.104 --out expl": Short(),
    "dtr-holes map --trace resnet32 --from 0.09 --to 0.11 --chunks 4 --out map.parquet": Short(
        ("7 holes", "981,111,552")
    ),
    "dtr-holes protocol points --stage C --trace unet": Short(),
    "dtr-holes protocol show": Short(),
    "dtr-holes simulate --trace resnet32 --ratio 0.1 --policy examples/policies.py:stale_squared": (
        Short()
    ),
    "dtr-holes map --trace resnet32 --from 0.09 --to 0.11 --out mine.parquet --policy "
    "examples/policies.py:stale_squared": Short(),
    "dtr-holes audit results": Short(cwd="results"),
    "dtr-holes audit results --sample 50 --seed 7 --workers 2": Short(cwd="results"),
    "dtr-holes audit results --sample all --workers 2": Short(cwd="results"),
    "dtr-holes trace-torch --factory mymodel.py:make --out mymodel.log": Short(
        ("149 operators", "84,041,816"), files=("mymodel.py",), torch=True
    ),
    "dtr-holes map --trace mymodel.log --from 0.05 --to 1 --out mymodel-map.parquet": Short(
        ("429 runs",),
        files=("mymodel.py",),
        torch=True,
        before="dtr-holes trace-torch --factory mymodel.py:make --out mymodel.log",
    ),
    R32_V100: Short(("6,779,251,016",), torch=True),
    "dtr-holes map --trace r32-v100.log --from 0.15 --to 0.18 --out r32-v100.parquet": Short(
        ("992", "25 holes"), torch=True, before=R32_V100
    ),
}
# Long commands: what runs each at a small scale here.
ELSEWHERE = {
    "python3 -m venv .venv && pip install -c requirements.lock -e . && snakemake --cores all": (
        "CI's install (.ci/run), and the pipeline's tests on the tiny scenario"
    ),
    "python3 -m venv .venv && pip install -c requirements.lock -e '.[test]' && "
    "python -m pytest -q": "this suite, as CI runs it (.ci/run)",
    "snakemake --cores all": "tests/workflow/test_pipeline.py (the tiny scenario)",
    "snakemake --cores all --configfile config/quick.yaml": "tests/workflow/test_pipeline.py",
    "snakemake --cores all --config traces='[unet]' policies='[dtr, he-star]'": (
        "tests/workflow/unit/test_settings.py (traces and policies restricted)"
    ),
    "snakemake --cores all --configfile config/broad.yaml": "tests/workflow/test_pipeline.py",
    "snakemake --cores all --configfile config/maps.yaml": "tests/workflow/test_pipeline.py (maps)",
    "snakemake --cores all --configfile config/cost-noise.yaml": (
        "tests/workflow/unit/test_noise.py"
    ),
    "snakemake --cores all --configfile config/own.yaml": "tests/workflow/test_own_traces.py",
    "snakemake --cores all -n": "tests/workflow/test_amendments.py (the walkthrough's dry run)",
    "snakemake --workflow-profile profiles/slurm": "tests/workflow/test_slurm.py",
    "pip install -c requirements.lock -e '.[torch]'": "CI's install (.ci/run)",
    "python benchmarks/gpu_allocator_check.py --trace resnet32": (
        "tests/tracing/test_gpu_check.py (the output docs/runtime.md shows, without CUDA)"
    ),
}


def test_every_command_the_docs_show_is_run_here_or_named_with_its_test() -> None:
    shown = {s.command for s in SHOWN}
    assert shown - set(SHORT) - set(ELSEWHERE) == set()  # shown, neither run nor placed
    assert set(SHORT) | set(ELSEWHERE) <= shown  # an entry whose command no doc shows


def test_each_figure_stands_in_its_commands_section() -> None:
    missing = [
        (s.doc.name, s.line, figure)
        for s in SHOWN
        if s.command in SHORT
        for figure in SHORT[s.command].figures
        if figure not in s.section
    ]
    assert missing == []


def _file_shown(shown: Shown, name: str) -> str:
    """The code block headed `# <name>` that the doc shows before the command."""
    text = "\n".join(shown.doc.read_text(encoding="utf-8").splitlines()[: shown.line])
    blocks = re.findall(rf"\n    # {re.escape(name)}\n((?:    .*\n|\n)+)", text + "\n")
    return "\n".join(line[4:] for line in blocks[-1].splitlines()) + "\n"


def _prepare(shown: Shown, short: Short, here: Path, request: pytest.FixtureRequest) -> Path:
    here.mkdir(parents=True)
    if short.cwd == "results":  # the scenario run to the end, shared with the pipeline's tests
        completed = request.getfixturevalue("completed")
        shutil.copytree(completed, here, symlinks=True, dirs_exist_ok=True)
    for name in short.files:
        if name == "my-trace.log":
            write(here / name, chain_lines())
        else:
            (here / name).write_text(_file_shown(shown, name), encoding="utf-8")
    for shared in ("config", "examples", "protocol", "tests"):  # the docs run from the repository
        if not (here / shared).exists():
            (here / shared).symlink_to(REPO / shared)
    return here


@pytest.fixture(scope="module")
def data(archive: Path) -> Path:
    """A data directory the commands fetch into (the archive is already verified there)."""
    return archive.parent


@pytest.mark.parametrize("command", sorted(SHORT))
def test_a_short_command_runs_and_prints_its_figures(
    command: str, data: Path, request, tmp_path: Path, monkeypatch, capsys
) -> None:
    short = SHORT[command]
    if short.torch:
        pytest.importorskip("torch", reason="the optional `torch` extra is not installed")
    shown = next(s for s in SHOWN if s.command == command)
    here = _prepare(shown, short, tmp_path / "here", request)
    monkeypatch.chdir(here)
    monkeypatch.setenv(fetch.DATA_ENV, str(data))
    if short.before:
        assert main(shlex.split(short.before)[1:]) == 0
    code = main(shlex.split(command)[1:])
    out, err = capsys.readouterr()
    assert code == 0, err
    missing = [figure for figure in short.figures if figure not in out + err]
    assert missing == [], out[-2000:]
