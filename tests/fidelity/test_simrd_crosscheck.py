"""Cross-check with unmodified simrd: locating its source, agreement on random and real traces."""

from __future__ import annotations

import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from dtrholes.study import simrd
from dtrholes.traces import fetch
from simulator import Result, UserError, budget_for, peak_memory, reference, simulate
from tests.support.tracegen import random_trace_text, tiny_trace

SIMRD = os.environ.get(simrd.SIMRD_ENV)
needs_simrd = pytest.mark.skipif(
    not SIMRD, reason=f"set ${simrd.SIMRD_ENV} to a simrd checkout or archive to run simrd"
)
FIELDS = ("outcome", "clock", "evictions", "eviction_seq_sha256")
FRACTIONS = ((1, 3), (1, 2), (3, 4))
CAP = 1.2  # thrashes several of the random traces below a half of their peak
DTR_SEEDS = range(25)
OTHER_SEEDS = range(6)
# Random traces with joins, where simrd's incrementally kept regions drift from a rebuild.
JOIN_SEEDS = range(40)
SIMRD_POLICIES = tuple(simrd.SIMRD_HEURISTICS)


def _fake_simrd(root: Path, init: str = "") -> Path:
    """A stand-in package tree root/simrd/simrd/__init__.py; returns root."""
    package = root / "simrd" / "simrd"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(init)
    return root


def _tar(folder: Path, dest: Path, arcname: str) -> Path:
    with tarfile.open(dest, "w:gz") as t:
        t.add(folder, arcname, filter=lambda m: None if "__pycache__" in m.name else m)
    return dest


def _zip(files: dict[str, str], dest: Path) -> Path:
    with zipfile.ZipFile(dest, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return dest


def _one_line_error(spec: Path, work: Path) -> str:
    with pytest.raises(UserError) as caught:
        simrd.locate_simrd(spec, work)
    message = str(caught.value)
    assert "\n" not in message
    assert str(spec) in message
    return message


# --- locating the source: always run ---------------------------------------------------------


def test_missing_path_is_a_user_error(tmp_path: Path) -> None:
    assert "no such file" in _one_line_error(tmp_path / "nowhere", tmp_path / "work")


def test_a_file_that_is_not_an_archive_is_a_user_error(tmp_path: Path) -> None:
    text = tmp_path / "simrd.txt"
    text.write_text("not an archive")
    assert "not a .zip" in _one_line_error(text, tmp_path / "work")


def test_a_damaged_archive_is_a_user_error(tmp_path: Path) -> None:
    for name in ("simrd.zip", "simrd.tar.gz"):
        broken = tmp_path / name
        broken.write_bytes(b"not really compressed")
        assert "unreadable archive" in _one_line_error(broken, tmp_path / "work")


def test_archives_and_directories_without_simrd_are_user_errors(tmp_path: Path) -> None:
    other = tmp_path / "other"
    (other / "pkg").mkdir(parents=True)
    (other / "pkg" / "__init__.py").write_text("")
    for spec in (
        _zip({"dtr-prototype/README.md": "no simulator here"}, tmp_path / "repo.zip"),
        _tar(other, tmp_path / "repo.tar.gz", "dtr-prototype"),
        other,
    ):
        assert "without simrd" in _one_line_error(spec, tmp_path / "work")
    assert not (tmp_path / "work").exists()  # nothing is extracted from an archive without simrd


def test_directory_at_either_level(tmp_path: Path) -> None:
    repo = _fake_simrd(tmp_path / "repo")
    want = (repo / "simrd").resolve()
    assert simrd.locate_simrd(repo, tmp_path / "work") == want
    assert simrd.locate_simrd(repo / "simrd", tmp_path / "work") == want


def test_archive_is_extracted_once(tmp_path: Path) -> None:
    repo = _fake_simrd(tmp_path / "repo")
    work = tmp_path / "work"
    for archive in (
        _tar(repo, tmp_path / "src.tar.gz", "dtr-prototype-main"),
        _zip({"simrd/simrd/__init__.py": ""}, tmp_path / "src.zip"),
    ):
        first = simrd.locate_simrd(archive, work)
        assert (first / "simrd" / "__init__.py").is_file()
        assert first.name == "simrd"
        assert simrd.locate_simrd(str(archive), work) == first
    assert len(list(work.iterdir())) == 2  # one extraction per archive, no leftovers


def test_policies_without_a_simrd_class_are_user_errors() -> None:
    assert simrd.simrd_heuristic("dtr") == "DTR"
    assert simrd.simrd_heuristic("LRU") == "LRU"
    for name in ("nbhd-penalty", "no-such-policy"):
        with pytest.raises(UserError):
            simrd.simrd_heuristic(name)


def test_a_run_over_time_is_a_timeout(tmp_path: Path) -> None:
    source = _fake_simrd(tmp_path, "import time\ntime.sleep(30)\n") / "simrd"
    log = tmp_path / "t.log"
    log.write_text(random_trace_text(0))
    run = simrd.run_simrd(source, log, 100, timeout_s=1)
    assert run["outcome"] == "timeout"
    assert 1 <= run["wall_s"] < 20


def test_a_failing_simrd_is_a_user_error(tmp_path: Path) -> None:
    source = _fake_simrd(tmp_path, "raise ImportError('broken checkout')\n") / "simrd"
    log = tmp_path / "t.log"
    log.write_text(random_trace_text(0))
    with pytest.raises(UserError, match="broken checkout"):
        simrd.run_simrd(source, log, 100)


def test_trace_log_is_the_verified_member_written_once(archive: Path) -> None:
    entry = fetch.find_entry("resnet32")
    log = simrd.trace_log("resnet32", archive.parent, str(archive), fetch.DEFAULT_SHEET)
    assert fetch.sha256_file(log) == entry.sha256
    written = log.stat().st_mtime_ns
    again = simrd.trace_log("resnet32", archive.parent, str(archive), fetch.DEFAULT_SHEET)
    assert again == log and log.stat().st_mtime_ns == written
    assert simrd.trace_log(str(log), archive.parent, None, fetch.DEFAULT_SHEET) == log


# --- agreement with unmodified simrd: needs $DTR_HOLES_SIMRD ----------------------------------


@pytest.fixture(scope="session")
def simrd_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not SIMRD:
        pytest.skip(f"${simrd.SIMRD_ENV} is not set")
    return simrd.locate_simrd(SIMRD, tmp_path_factory.mktemp("simrd"))


def _agree(source: Path, log: Path, trace, budget: int, policy: str, cap: float | None) -> Result:
    """Assert simrd and simulate() agree; returns simulate()'s Result."""
    theirs = simrd.run_simrd(source, log, budget, policy, overhead_cap=cap)
    ours = simulate(trace, budget, policy, overhead_cap=cap)
    label = f"{log.name}, {policy}, budget {budget}, cap {cap}"
    assert {f: theirs[f] for f in FIELDS} == {f: getattr(ours, f) for f in FIELDS}, label
    assert theirs["simrd_file"].startswith(str(source))
    return ours


def _random_cases(tmp_path: Path, seed: int, joins: bool = False):
    text = random_trace_text(seed, 40, joins=joins)
    log = tmp_path / f"random-{seed}.log"
    log.write_text(text)
    trace = tiny_trace(text)
    peak = peak_memory(trace)
    return log, trace, [peak * num // den for num, den in FRACTIONS]


@needs_simrd
def test_dtr_agrees_on_random_traces(simrd_source: Path, tmp_path: Path) -> None:
    outcomes = set()
    for seed in DTR_SEEDS:
        log, trace, budgets = _random_cases(tmp_path, seed)
        for budget in budgets:
            for cap in (None, CAP):
                outcomes.add(_agree(simrd_source, log, trace, budget, "dtr", cap).outcome)
    assert outcomes == {"ok", "oom", "thrashed"}


@needs_simrd
@pytest.mark.parametrize("policy", [p for p in SIMRD_POLICIES if p != "dtr"])
def test_other_simrd_policies_agree_on_random_traces(
    simrd_source: Path, tmp_path: Path, policy: str
) -> None:
    for seed in OTHER_SEEDS:
        log, trace, budgets = _random_cases(tmp_path, seed)
        for budget in budgets:
            _agree(simrd_source, log, trace, budget, policy, CAP)


@needs_simrd
def test_drifting_regions_agree_on_random_traces_with_joins(
    simrd_source: Path, tmp_path: Path
) -> None:
    """With joins, simrd's regions (kept up to date at evictions and recomputations) can drift
    from a rebuild from scratch and change decisions: the naive replay, which rebuilds them at
    every score, decides otherwise on some of these runs. simulate() follows simrd's drift."""
    from_scratch_differs = 0
    for seed in JOIN_SEEDS:
        log, trace, budgets = _random_cases(tmp_path, seed, joins=True)
        for budget in budgets:
            for policy in ("dtr", "msps"):
                ours = _agree(simrd_source, log, trace, budget, policy, CAP)
                naive = reference.simulate_capped(trace, budget, policy, CAP)
                from_scratch_differs += naive["eviction_seq_sha256"] != ours.eviction_seq_sha256
    assert from_scratch_differs > 0


@needs_simrd
def test_overhead_cap_thrashes_both(simrd_source: Path, tmp_path: Path) -> None:
    log, trace, budgets = _random_cases(tmp_path, 0)
    assert _agree(simrd_source, log, trace, budgets[0], "dtr", None).outcome == "ok"
    assert _agree(simrd_source, log, trace, budgets[0], "dtr", CAP).outcome == "thrashed"


@needs_simrd
@pytest.mark.parametrize(
    ("ratio", "cap", "outcome"),
    [(0.101, None, "ok"), (0.104, None, "oom"), (0.101, 1.5, "thrashed")],
)
def test_resnet32_agrees(
    simrd_source: Path, archive: Path, load_named, ratio: float, cap: float | None, outcome: str
) -> None:
    log = simrd.trace_log("resnet32", archive.parent, str(archive), fetch.DEFAULT_SHEET)
    trace = load_named("resnet32")
    budget = budget_for(trace, ratio)
    assert _agree(simrd_source, log, trace, budget, "dtr", cap).outcome == outcome


@needs_simrd
def test_simrd_runs_from_an_extracted_archive(simrd_source: Path, tmp_path: Path) -> None:
    archive = _tar(simrd_source, tmp_path / "simrd.tar.gz", "simrd")
    extracted = simrd.locate_simrd(archive, tmp_path / "work")
    assert extracted != simrd_source
    log, trace, budgets = _random_cases(tmp_path, 2)
    for budget in budgets:
        _agree(extracted, log, trace, budget, "dtr", CAP)
