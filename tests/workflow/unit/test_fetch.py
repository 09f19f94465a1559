"""Fetching and verifying the archive, reading the trace sheet, and the compiled-trace cache."""

from __future__ import annotations

import dataclasses
import hashlib
import zipfile
from pathlib import Path

import pytest

from dtrholes.traces import fetch
from simulator import store
from simulator.errors import UserError
from tests.support import archive as support

NAMES = [
    "densenet121",
    "inceptionv4",
    "lstm",
    "resnet32",
    "transformer",
    "treelstm",
    "unet",
    "unroll_gan",
]
HEADER = "name\tfile\tsha256\trole\ttitle\n"


def leftovers(directory: Path) -> list[Path]:
    return list(directory.glob(".*.part"))


def test_mirror_copy_is_verified_and_placed(tmp_path: Path, archive: Path) -> None:
    path = fetch.fetch_archive(tmp_path, str(archive))
    assert path == tmp_path / fetch.ARCHIVE_NAME
    assert fetch.sha256_file(path) == fetch.ARCHIVE_SHA256
    assert leftovers(tmp_path) == []


def test_env_var_names_the_mirror(tmp_path: Path, archive: Path, monkeypatch) -> None:
    monkeypatch.setenv(fetch.ARCHIVE_ENV, str(archive))
    assert fetch.sha256_file(fetch.fetch_archive(tmp_path)) == fetch.ARCHIVE_SHA256


def test_file_url_goes_through_the_downloader(tmp_path: Path, archive: Path) -> None:
    path = fetch.fetch_archive(tmp_path, archive.resolve().as_uri())
    assert fetch.sha256_file(path) == fetch.ARCHIVE_SHA256


def test_verified_archive_is_reused_without_its_source(tmp_path: Path, archive: Path) -> None:
    fetch.fetch_archive(tmp_path, str(archive))
    assert fetch.fetch_archive(tmp_path, str(tmp_path / "gone.zip")).is_file()


def test_corrupt_mirror_names_both_checksums(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror.zip"
    mirror.write_bytes(b"not the archive")
    data = tmp_path / "data"
    with pytest.raises(fetch.FetchError) as caught:
        fetch.fetch_archive(data, str(mirror))
    message = str(caught.value)
    assert str(mirror) in message
    assert fetch.ARCHIVE_SHA256 in message
    assert hashlib.sha256(b"not the archive").hexdigest() in message
    assert not (data / fetch.ARCHIVE_NAME).exists()
    assert leftovers(data) == []


def test_corrupt_archive_in_data_dir_is_replaced(tmp_path: Path, archive: Path) -> None:
    (tmp_path / fetch.ARCHIVE_NAME).write_bytes(b"truncated")
    path = fetch.fetch_archive(tmp_path, str(archive))
    assert fetch.sha256_file(path) == fetch.ARCHIVE_SHA256


def test_member_checksum_is_checked_against_the_sheet(tmp_path: Path, archive: Path) -> None:
    rows = fetch.DEFAULT_SHEET.read_text().splitlines()
    wrong = "0" * 64
    rows[4] = rows[4].replace(rows[4].split("\t")[2], wrong)
    sheet = tmp_path / "traces.tsv"
    sheet.write_text("\n".join(rows) + "\n")
    with pytest.raises(fetch.FetchError) as caught:
        fetch.fetch_archive(tmp_path / "data", str(archive), sheet=sheet)
    message = str(caught.value)
    member = rows[4].split("\t")[1]
    assert member in message and wrong in message
    assert fetch.read_sheet()[3].sha256 in message


def test_missing_mirror_is_a_fetch_error(tmp_path: Path) -> None:
    with pytest.raises(fetch.FetchError, match="nowhere.zip"):
        fetch.fetch_archive(tmp_path, str(tmp_path / "nowhere.zip"))


def test_unreachable_url_is_retried_then_reported(tmp_path: Path, monkeypatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(fetch.time, "sleep", sleeps.append)
    url = (tmp_path / "nowhere.zip").as_uri()
    with pytest.raises(fetch.FetchError, match="nowhere.zip") as caught:
        fetch.fetch_archive(tmp_path / "data", url, retries=3)
    assert "3 times" in str(caught.value)
    assert len(sleeps) == 2
    assert leftovers(tmp_path / "data") == []


def test_sheet_lists_the_eight_traces() -> None:
    entries = fetch.read_sheet()
    assert [e.name for e in entries] == NAMES
    assert {e.name for e in entries if e.role == "development"} == {"lstm", "resnet32"}
    assert all(e.member.startswith("logs/") and len(e.sha256) == 64 for e in entries)
    assert all(e.file == fetch.ARCHIVE_PREFIX + e.member for e in entries)


def test_sheet_members_exist_in_the_archive(archive: Path) -> None:
    members = set(zipfile.ZipFile(archive).namelist())
    assert {e.member for e in fetch.read_sheet()} <= members


GOOD_ROW = f"unet\tdtr-logs.zip:logs/unet.log\t{'a' * 64}\tconfirmatory\tU-Net (6)\n"
OWN_ROW = f"mine\tmine.log\t{'b' * 64}\town\tMine\n"


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("name\tmember\n" + GOOD_ROW, 1, "header"),
        ("", 1, "header"),
        (HEADER + GOOD_ROW + "lstm\tlogs/lstm.log\n", 3, "5 tab-separated cells"),
        (HEADER + GOOD_ROW.replace("a" * 64, "xyz"), 2, "sha256"),
        (HEADER + GOOD_ROW.replace("confirmatory", "exploratory"), 2, "role"),
        (HEADER + GOOD_ROW.replace("unet\t", "U Net\t"), 2, "name"),
        (HEADER + GOOD_ROW.replace(".log", ".txt"), 2, "file"),
        (
            HEADER
            + GOOD_ROW
            + GOOD_ROW.replace("unet\tdtr-logs.zip:logs/unet.log", "u2\trecost:unet:gauss"),
            3,
            "file",
        ),
        (
            HEADER
            + GOOD_ROW.replace("unet\tdtr-logs.zip:logs/unet.log", "u2\trecost:unet:uniform"),
            2,
            "a recost of a trace listed above",
        ),
        (HEADER + GOOD_ROW + GOOD_ROW, 3, "not listed before"),
        (HEADER + GOOD_ROW.replace("dtr-logs.zip:logs/unet.log", "mine.log"), 2, "role own"),
        (HEADER + GOOD_ROW + OWN_ROW.replace("mine.log", "recost:unet:bad.log"), 3, "file"),
    ],
)
def test_malformed_sheet_names_file_and_line(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    sheet = tmp_path / "traces.tsv"
    sheet.write_text(text)
    with pytest.raises(fetch.SheetError, match=fragment) as caught:
        fetch.read_sheet(sheet)
    assert str(caught.value).startswith(f"{sheet}:{line}: ")


def test_sheet_without_rows_or_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.tsv"
    empty.write_text(HEADER)
    with pytest.raises(fetch.SheetError, match="at least one"):
        fetch.read_sheet(empty)
    with pytest.raises(fetch.SheetError, match="missing.tsv"):
        fetch.read_sheet(tmp_path / "missing.tsv")


def test_unknown_trace_name_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(UserError) as caught:
        fetch.load_trace("resnet50", tmp_path)
    message = str(caught.value)
    assert "'resnet50'" in message
    assert all(name in message for name in NAMES)
    assert not isinstance(caught.value, fetch.FetchError)


def test_second_load_reuses_the_compiled_trace(
    tmp_path: Path, archive: Path, monkeypatch, assert_same_trace
) -> None:
    first = fetch.load_trace("unet", tmp_path, str(archive))
    entry = fetch.find_entry("unet")
    cache = tmp_path / "compiled" / f"unet-{entry.sha256[:16]}.parquet"
    assert cache == fetch.compiled_path(tmp_path, entry) and cache.is_file()
    assert first.name == "unet" and first.sha256 == entry.sha256
    mtime = cache.stat().st_mtime_ns

    def must_not_parse(*args, **kwargs):
        raise AssertionError("the cached trace was parsed again")

    monkeypatch.setattr(fetch, "parse_trace", must_not_parse)
    second = fetch.load_trace("unet", tmp_path, str(archive))
    assert cache.stat().st_mtime_ns == mtime
    assert_same_trace(first, second)


def test_damaged_or_stale_cache_is_rebuilt(
    tmp_path: Path, archive: Path, monkeypatch, assert_same_trace
) -> None:
    first = fetch.load_trace("unet", tmp_path, str(archive))
    cache = fetch.compiled_path(tmp_path, fetch.find_entry("unet"))
    cache.write_bytes(b"damaged")
    assert_same_trace(first, fetch.load_trace("unet", tmp_path, str(archive)))
    assert store.is_current(cache, first.sha256)
    monkeypatch.setattr(store, "compiler_fingerprint", lambda: "a newer compiler")
    assert not store.is_current(cache, first.sha256)
    assert_same_trace(first, fetch.load_trace("unet", tmp_path, str(archive)))
    assert store.is_current(cache, first.sha256)


def test_log_and_parquet_paths_are_read_directly(
    tmp_path: Path, archive: Path, load_named, assert_same_trace
) -> None:
    entry = fetch.find_entry("resnet32")
    log = tmp_path / "resnet32.log"
    log.write_bytes(zipfile.ZipFile(archive).read(entry.member))
    assert_same_trace(fetch.load_trace(str(log), tmp_path / "unused"), load_named("resnet32"))
    parquet = tmp_path / "resnet32.parquet"
    store.save_trace(load_named("resnet32"), parquet)
    assert_same_trace(fetch.load_trace(str(parquet), tmp_path / "unused"), load_named("resnet32"))
    assert not (tmp_path / "unused").exists()


def test_data_dir_defaults_to_the_repository_and_follows_the_env_var(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delenv(fetch.DATA_ENV, raising=False)
    assert fetch.default_data_dir() == Path(fetch.__file__).resolve().parents[3] / "data"
    monkeypatch.setenv(fetch.DATA_ENV, str(tmp_path))
    assert fetch.default_data_dir() == tmp_path


def test_the_tests_read_the_archive_the_workflow_fetches() -> None:
    """The tests' fixtures read the archive with the simulator alone (tests/support/archive.py):
    the same archive, source variable and trace sheet as `fetch`."""
    ours = (support.ARCHIVE_URL, support.ARCHIVE_SHA256, support.ARCHIVE_ENV, support.ARCHIVE_NAME)
    assert ours == (fetch.ARCHIVE_URL, fetch.ARCHIVE_SHA256, fetch.ARCHIVE_ENV, fetch.ARCHIVE_NAME)
    assert support.SHEET == fetch.DEFAULT_SHEET
    assert support.read_sheet() == [tuple(dataclasses.astuple(e)) for e in fetch.read_sheet()]


def sheet_with(tmp_path: Path, *rows: str) -> Path:
    """The study's sheet with `rows` (tab-separated cells) added below it."""
    sheet = tmp_path / "traces.tsv"
    sheet.write_text(fetch.DEFAULT_SHEET.read_text() + "".join(r + "\n" for r in rows))
    return sheet


def test_a_trace_file_of_your_own_is_read_and_checked(tmp_path: Path, archive: Path) -> None:
    data = zipfile.ZipFile(archive).read(fetch.find_entry("resnet32").member)
    mine = tmp_path / "mine.log"
    mine.write_bytes(data)
    good = hashlib.sha256(data).hexdigest()
    sheet = sheet_with(tmp_path, f"mine\t{mine}\t{good}\town\tMine")
    trace = fetch.load_trace("mine", tmp_path / "data", str(archive), sheet=sheet)
    assert trace.name == "mine" and trace.sha256 == good
    assert fetch.find_entry("mine", sheet).path == mine
    mine.write_bytes(data + b"\n")  # edited after the sheet was written: refused
    sheet = sheet_with(tmp_path, f"mine2\t{mine}\t{good}\town\tMine")
    with pytest.raises(fetch.FetchError) as caught:
        fetch.load_trace("mine2", tmp_path / "data", str(archive), sheet=sheet)
    assert str(mine) in str(caught.value) and good in str(caught.value)


def test_a_generated_trace_is_made_and_checked(tmp_path: Path, archive: Path) -> None:
    recipe = "recost:unet:lognormal:0.05:3"
    base = fetch.load_trace("unet", tmp_path / "data", str(archive))
    sheet = sheet_with(tmp_path, f"noisy\t{recipe}\t{'0' * 64}\town\tU-Net, noisy")
    with pytest.raises(fetch.FetchError) as caught:
        fetch.load_trace("noisy", tmp_path / "data", str(archive), sheet=sheet)
    made = str(caught.value).rsplit(" ", 1)[-1]  # the error names the sha256 it found
    assert len(made) == 64 and recipe in str(caught.value)
    sheet = sheet_with(tmp_path, f"noisy\t{recipe}\t{made}\town\tU-Net, noisy")
    noisy = fetch.load_trace("noisy", tmp_path / "data", str(archive), sheet=sheet)
    assert noisy.sha256 == made
    assert list(noisy.tensor_size) == list(base.tensor_size)
    assert list(noisy.cmd_kind) == list(base.cmd_kind)
    assert list(noisy.op_cost) != list(base.op_cost)
