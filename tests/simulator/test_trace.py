"""Parsing simrd's JSON-lines traces: the compiled schedule, determinism and one-line errors."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from simulator.errors import TraceError
from simulator.trace import (
    CALL_OP,
    COMPUTE,
    CONSTANT_OP,
    GET,
    MUTATE_OP,
    PIN,
    RELEASE,
    Trace,
    parse_trace,
    read_archive_member,
    read_trace,
)

ARCHIVE = Path(__file__).resolve().parents[3] / "shared" / "traces" / "dtr-logs.zip"
RESNET32 = "logs/resnet32-56-9000000000.0-2020-10-1-13-3-30-default.log"
SOURCE = "t.log"


def j(**fields: object) -> str:
    """One trace line, shaped like the real logs (sorted keys, no spaces)."""
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


START = j(INSTRUCTION="ANNOTATE", ANNOTATION="START")


def constant(name: str, memory: object = "8") -> list[str]:
    return [j(INSTRUCTION="CONSTANT", NAME=name), j(INSTRUCTION="MEMORY", NAME=name, MEMORY=memory)]


def call(result: str, args: list[str], time: object = "10", memory: object = "100") -> list[str]:
    """A single-result CALL with its MEMORY and (non-aliasing) ALIAS lines."""
    return [
        j(INSTRUCTION="CALL", RESULT=[result], NAME="op", ARGS=args, TIME=time),
        j(INSTRUCTION="MEMORY", NAME=result, MEMORY=memory),
        j(INSTRUCTION="ALIAS", NAME=result, ALIAS="-1"),
    ]


def release(name: str) -> str:
    return j(INSTRUCTION="RELEASE", NAME=name)


def encode(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def parse_lines(lines: list[str]) -> Trace:
    return parse_trace(encode(lines), SOURCE)


def parse_error(lines: list[str] | bytes) -> TraceError:
    data = lines if isinstance(lines, bytes) else encode(lines)
    with pytest.raises(TraceError) as info:
        parse_trace(data, SOURCE)
    return info.value


def assert_error(err: TraceError, line: int, expected: str, found: str = "") -> None:
    """The error is one line `t.log:<line>: expected <expected...>, found <...found...>`."""
    message = str(err)
    assert (err.source, err.line) == (SOURCE, line), message
    assert message.startswith(f"{SOURCE}:{line}: expected {expected}"), message
    assert found in message.split(", found ", 1)[1], message
    assert "\n" not in message


# ---------------------------------------------------------------- the compiled schedule

HAND_TRACE = [
    *constant("pre"),  # 1-2: before START, so never defined
    START,  # 3
    *constant("w", "16"),  # 4-5
    *call("x", ["w"], time="10", memory="100"),  # 6-8
    j(INSTRUCTION="CALL", RESULT=["v"], NAME="view", ARGS=["w", "x"], TIME="1"),  # 9
    j(INSTRUCTION="MEMORY", NAME="v", MEMORY="100"),  # 10: ignored, v aliases x
    j(INSTRUCTION="ALIAS", NAME="v", ALIAS="1"),  # 11
    release("pre"),  # 12: simrd ignores releases of undefined names
    j(INSTRUCTION="MUTATE", NAME="relu_", ARGS=["x", "v"], MUTATE=[1], TIME="5"),  # 13
    j(INSTRUCTION="COPY", DST="y", SRC="w"),  # 14
    j(INSTRUCTION="COPY_FROM", DST="y", SRC="x"),  # 15
    release("x"),  # 16: y still holds x's tensor
    release("w"),  # 17: w's tensor is no longer referenced, so it is not an output
    j(INSTRUCTION="ANNOTATE", ANNOTATION="BACKWARD"),  # 18
]


@pytest.fixture(scope="module")
def hand() -> Trace:
    return parse_lines(HAND_TRACE)


def test_hand_trace_operators(hand: Trace) -> None:
    assert hand.op_kind.tolist() == [CONSTANT_OP, CALL_OP, CALL_OP, MUTATE_OP]
    assert hand.op_cost.tolist() == [0, 10, 1, 5]
    assert hand.op_line.tolist() == [4, 6, 9, 13]
    assert hand.op_arg_ptr.tolist() == [0, 0, 1, 3, 5]
    assert hand.op_args.tolist() == [0, 0, 1, 1, 2]
    assert hand.op_out_ptr.tolist() == [0, 1, 2, 3, 4]
    assert hand.model_compute == 16


def test_hand_trace_tensors(hand: Trace) -> None:
    # The alias allocates nothing; the mutated alias allocates its argument's whole storage.
    assert hand.tensor_names == ("w", "x", "v", "v$")
    assert hand.tensor_size.tolist() == [16, 100, 0, 100]
    assert hand.tensor_alias.tolist() == [-1, -1, 1, -1]
    assert (hand.n_ops, hand.n_tensors) == (4, 4)


def test_hand_trace_schedule(hand: Trace) -> None:
    expected = [
        (COMPUTE, 0, 4),  # constant w ...
        (PIN, 0, 4),  # ... is pinned at once
        (COMPUTE, 1, 6),
        (COMPUTE, 2, 9),
        (COMPUTE, 3, 13),  # MUTATE makes v$ ...
        (RELEASE, 2, 13),  # ... and drops the old v
        (GET, 0, 14),  # COPY y <- w
        (RELEASE, 0, 15),  # COPY_FROM y <- x drops y's old tensor ...
        (GET, 1, 15),  # ... and takes x's
        (RELEASE, 1, 16),
        (RELEASE, 0, 17),
        # Outputs in first-definition order of the names (w, x, v, y), one PIN per live name.
        (PIN, 1, 18),  # x: its tensor is still held by y
        (PIN, 3, 18),  # v -> v$
        (PIN, 1, 18),  # y
    ]
    got = list(
        zip(hand.cmd_kind.tolist(), hand.cmd_arg.tolist(), hand.cmd_line.tolist(), strict=True)
    )
    assert got == expected


def test_hand_trace_dtypes(hand: Trace) -> None:
    assert hand.op_kind.dtype == np.int8 and hand.cmd_kind.dtype == np.int8
    assert hand.op_cost.dtype == np.int64 and hand.tensor_size.dtype == np.int64
    assert hand.cmd_arg.dtype == np.int32 and hand.op_args.dtype == np.int32


def test_name_defaults_to_file_stem_and_can_be_given() -> None:
    data = encode([START, *call("a", [])])
    assert parse_trace(data, "dir/model-1.log").name == "model-1"
    assert parse_trace(data, "dir/model-1.log", "custom").name == "custom"


@pytest.mark.parametrize("body", [[], constant("c")], ids=["start-only", "constants-only"])
def test_a_trace_without_an_operator_is_an_error(body: list[str]) -> None:
    """simrd replays it and "completes" at budget 0: no trace of a training step."""
    err = parse_error([START, *body])
    assert_error(err, 1 + len(body), "an operator (CALL or MUTATE)", "none")


def test_a_blank_line_is_named_as_such() -> None:
    """simrd's parser rejects it (json.loads of an empty string) and so does this one."""
    err = parse_error([START, *call("a", []), "", *call("b", [])])
    assert_error(err, 5, "a JSON object", "a blank line")


def test_mutate_names_output_after_the_tensor_not_the_binding() -> None:
    # simrd names a MUTATE output `<graph name of the mutated tensor>$`, so repeats stack up.
    lines = [START, *call("a", []), j(INSTRUCTION="COPY", DST="b", SRC="a")]
    mutate = j(INSTRUCTION="MUTATE", NAME="add_", ARGS=["b"], MUTATE=[0], TIME="1")
    trace = parse_lines([*lines, mutate, mutate])
    assert trace.tensor_names == ("a", "a$", "a$$")
    assert trace.tensor_size.tolist() == [100, 100, 100]


def test_constant_is_compute_then_pin_with_zero_cost() -> None:
    trace = parse_lines([START, *constant("c", "24"), *call("a", [])])
    assert trace.op_kind.tolist()[0] == CONSTANT_OP and trace.op_cost.tolist()[0] == 0
    # c's last PIN: it is still live at the end (and so is a)
    assert trace.cmd_kind.tolist() == [COMPUTE, PIN, COMPUTE, PIN, PIN]
    assert trace.tensor_size.tolist() == [24, 100]


def test_multi_result_call_with_alias() -> None:
    lines = [
        START,
        *call("a", []),
        j(INSTRUCTION="CALL", RESULT=["p", "q"], NAME="split", ARGS=["a"], TIME="3"),
        j(INSTRUCTION="MEMORY", NAME="p", MEMORY="40"),
        j(INSTRUCTION="ALIAS", NAME="p", ALIAS="-1"),
        j(INSTRUCTION="MEMORY", NAME="q", MEMORY="60"),
        j(INSTRUCTION="ALIAS", NAME="q", ALIAS="0"),
    ]
    trace = parse_lines(lines)
    assert trace.tensor_names == ("a", "p", "q")
    assert trace.tensor_size.tolist() == [100, 40, 0]
    assert trace.tensor_alias.tolist() == [-1, -1, 0]
    assert trace.op_out_ptr.tolist() == [0, 1, 3]


# ---------------------------------------------------------------- the real trace and determinism


@pytest.mark.skipif(not ARCHIVE.is_file(), reason=f"{ARCHIVE} not present")
def test_resnet32_model_compute() -> None:
    trace = read_archive_member(ARCHIVE, RESNET32)
    assert trace.model_compute == 291905487
    assert trace.name == Path(RESNET32).stem


def test_parsing_is_deterministic() -> None:
    data = encode(HAND_TRACE)
    first, second = parse_trace(data, SOURCE), parse_trace(data, SOURCE)
    assert first.sha256 == second.sha256 == hashlib.sha256(data).hexdigest()
    assert first.tensor_names == second.tensor_names
    for field in ("op_kind", "op_cost", "op_args", "tensor_size", "cmd_kind", "cmd_arg"):
        np.testing.assert_array_equal(getattr(first, field), getattr(second, field))


def test_sha256_changes_with_the_bytes() -> None:
    data = encode([START, *call("a", [])])  # ends with a newline
    assert parse_trace(data, SOURCE).sha256 != parse_trace(data[:-1], SOURCE).sha256


def test_read_trace_equals_parse_trace(tmp_path: Path) -> None:
    path = tmp_path / "hand.log"
    path.write_bytes(encode(HAND_TRACE))
    trace = read_trace(path)
    assert trace.name == "hand" and trace.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    np.testing.assert_array_equal(trace.cmd_arg, parse_lines(HAND_TRACE).cmd_arg)


# ---------------------------------------------------------------- files and archives


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.log"
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert info.value.source == str(path)
    assert str(info.value).startswith(f"{path}: expected a readable trace file, found ")


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    path = tmp_path / "logs.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("logs/good.log", encode([START, *call("a", [])]))
        zf.writestr("logs/bad.log", encode([START, "{oops"]))
    return path


def test_archive_member_is_parsed(archive: Path) -> None:
    trace = read_archive_member(archive, "logs/good.log")
    assert (trace.name, trace.tensor_names) == ("good", ("a",))


def test_missing_archive_member_names_archive_and_member(archive: Path) -> None:
    with pytest.raises(TraceError) as info:
        read_archive_member(archive, "logs/absent.log")
    assert info.value.source == f"{archive}:logs/absent.log"
    assert str(info.value).startswith(f"{archive}:logs/absent.log: expected a readable archive")


def test_not_an_archive_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "fake.zip"
    path.write_bytes(b"not a zip")
    with pytest.raises(TraceError, match=r"fake\.zip:logs/x\.log: expected a readable archive"):
        read_archive_member(path, "logs/x.log")


def test_error_inside_archive_member_names_member_and_line(archive: Path) -> None:
    with pytest.raises(TraceError) as info:
        read_archive_member(archive, "logs/bad.log")
    assert (info.value.source, info.value.line) == (f"{archive}:logs/bad.log", 2)


# ---------------------------------------------------------------- malformed traces


def test_invalid_json() -> None:
    assert_error(
        parse_error([START, *constant("a"), "{not json"]), 4, "a JSON object", "invalid JSON"
    )


@pytest.mark.parametrize("text", ['{"NAME":"a"}', "[1, 2]", '{"INSTRUCTION":5}', '"CALL"'])
def test_json_line_without_instruction(text: str) -> None:
    err = parse_error([START, text])
    assert_error(err, 2, "a JSON object with an INSTRUCTION field")


def test_unknown_instruction() -> None:
    err = parse_error([START, j(INSTRUCTION="FROB", NAME="a")])
    assert_error(err, 2, "a known instruction", "'FROB'")


@pytest.mark.parametrize("kind", ["MEMORY", "ALIAS"])
def test_memory_or_alias_outside_a_call(kind: str) -> None:
    err = parse_error([START, j(INSTRUCTION=kind, NAME="a", MEMORY="1", ALIAS="-1")])
    assert_error(err, 2, "CONSTANT, CALL, MUTATE", kind)


@pytest.mark.parametrize(
    ("line", "missing"),
    [
        (j(INSTRUCTION="CONSTANT"), "NAME"),
        (j(INSTRUCTION="CALL", RESULT=[], NAME="f", ARGS=[]), "TIME"),
        (j(INSTRUCTION="MUTATE", NAME="f", ARGS=[], TIME="1"), "MUTATE"),
        (j(INSTRUCTION="COPY", DST="b"), "SRC"),
        (j(INSTRUCTION="COPY_FROM", SRC="b"), "DST"),
        (j(INSTRUCTION="RELEASE"), "NAME"),
        (j(INSTRUCTION="ANNOTATE"), "ANNOTATION"),
    ],
)
def test_instruction_missing_a_field(line: str, missing: str) -> None:
    instr = json.loads(line)["INSTRUCTION"]
    assert_error(parse_error([START, *constant("a"), line]), 4, f"{instr} with field(s)", missing)


def test_memory_line_missing_a_field() -> None:
    err = parse_error(
        [START, j(INSTRUCTION="CONSTANT", NAME="a"), j(INSTRUCTION="MEMORY", NAME="a")]
    )
    assert_error(err, 3, "MEMORY with field(s) NAME, MEMORY", "no MEMORY")


def test_field_missing_before_start_is_still_an_error() -> None:
    # simrd parses every line, including those it skips, before looking for START.
    assert_error(parse_error([j(INSTRUCTION="COPY", DST="b"), START]), 1, "COPY with field(s)")


@pytest.mark.parametrize(
    "after",
    [
        [release("a")],
        [j(INSTRUCTION="MEMORY", NAME="b", MEMORY="8")],
        [j(INSTRUCTION="ALIAS", NAME="a", ALIAS="-1")],
    ],
    ids=["release", "memory-for-other-name", "alias"],
)
def test_constant_not_followed_by_its_memory(after: list[str]) -> None:
    err = parse_error([START, j(INSTRUCTION="CONSTANT", NAME="a"), *after])
    assert_error(err, 3, "MEMORY for 'a'")


def call_lines(*tail: str, results: tuple[str, ...] = ("r",)) -> list[str]:
    head = j(INSTRUCTION="CALL", RESULT=list(results), NAME="f", ARGS=["a"], TIME="7")
    return [START, *constant("a"), head, *tail]  # the CALL is line 4


@pytest.mark.parametrize(
    ("tail", "line", "expected"),
    [
        (  # MEMORY names another tensor
            [
                j(INSTRUCTION="MEMORY", NAME="s", MEMORY="1"),
                j(INSTRUCTION="ALIAS", NAME="s", ALIAS="-1"),
            ],
            5,
            "MEMORY for 'r'",
        ),
        (  # ALIAS names another tensor
            [
                j(INSTRUCTION="MEMORY", NAME="r", MEMORY="1"),
                j(INSTRUCTION="ALIAS", NAME="s", ALIAS="-1"),
            ],
            6,
            "ALIAS for 'r'",
        ),
        (  # ALIAS before MEMORY
            [
                j(INSTRUCTION="ALIAS", NAME="r", ALIAS="-1"),
                j(INSTRUCTION="MEMORY", NAME="r", MEMORY="1"),
            ],
            5,
            "MEMORY for 'r'",
        ),
        (  # ALIAS missing, next instruction follows at once
            [j(INSTRUCTION="MEMORY", NAME="r", MEMORY="1"), release("a")],
            6,
            "ALIAS for 'r'",
        ),
    ],
    ids=["memory-wrong-name", "alias-wrong-name", "alias-before-memory", "alias-missing"],
)
def test_call_memory_alias_lines_disagree_with_result(tail, line, expected) -> None:
    assert_error(parse_error(call_lines(*tail)), line, expected)


def test_second_result_lines_must_follow_in_result_order() -> None:
    tail = [
        j(INSTRUCTION="MEMORY", NAME="r", MEMORY="1"),
        j(INSTRUCTION="ALIAS", NAME="r", ALIAS="-1"),
        j(INSTRUCTION="MEMORY", NAME="r", MEMORY="1"),
    ]
    assert_error(parse_error(call_lines(*tail, results=("r", "s"))), 7, "MEMORY for 's'")


@pytest.mark.parametrize("alias", ["1", "-2", "5"])
def test_alias_index_out_of_range(alias: str) -> None:
    tail = [
        j(INSTRUCTION="MEMORY", NAME="r", MEMORY="0"),
        j(INSTRUCTION="ALIAS", NAME="r", ALIAS=alias),
    ]
    assert_error(parse_error(call_lines(*tail)), 6, "an ALIAS from -1 to 0", alias)


@pytest.mark.parametrize("alias", ["x", "1.5", None])
def test_non_integer_alias(alias: object) -> None:
    tail = [
        j(INSTRUCTION="MEMORY", NAME="r", MEMORY="0"),
        j(INSTRUCTION="ALIAS", NAME="r", ALIAS=alias),
    ]
    assert_error(parse_error(call_lines(*tail)), 6, "an integer ALIAS", repr(alias))


@pytest.mark.parametrize("time", ["fast", "1.5", None, [1]])
def test_non_integer_time(time: object) -> None:
    err = parse_error([START, *constant("a"), *call("r", ["a"], time=time)])
    assert_error(err, 4, "an integer TIME", repr(time))


def test_non_integer_mutate_time() -> None:
    mutate = j(INSTRUCTION="MUTATE", NAME="f", ARGS=["a"], MUTATE=[0], TIME="soon")
    assert_error(parse_error([START, *call("a", []), mutate]), 5, "an integer TIME", "'soon'")


@pytest.mark.parametrize("memory", ["big", "", None])
def test_non_integer_memory_of_call(memory: object) -> None:
    err = parse_error([START, *constant("a"), *call("r", ["a"], memory=memory)])
    assert_error(err, 5, "an integer MEMORY", repr(memory))


def test_non_integer_memory_of_constant() -> None:
    assert_error(parse_error([START, *constant("a", "8k")]), 3, "an integer MEMORY", "'8k'")


@pytest.mark.parametrize(
    "line",
    [
        j(INSTRUCTION="CALL", RESULT=["r"], NAME="f", ARGS=["a", "ghost"], TIME="1"),
        j(INSTRUCTION="COPY", DST="b", SRC="ghost"),
        j(INSTRUCTION="COPY_FROM", DST="ghost", SRC="a"),
        j(INSTRUCTION="COPY_FROM", DST="a", SRC="ghost"),
        j(INSTRUCTION="MUTATE", NAME="f", ARGS=["ghost"], MUTATE=[0], TIME="1"),
    ],
    ids=["call-arg", "copy-src", "copy-from-dst", "copy-from-src", "mutate-arg"],
)
def test_reference_to_undefined_tensor(line: str) -> None:
    err = parse_error([START, *constant("a"), line])
    assert_error(err, 4, "a tensor defined earlier in the trace", "'ghost'")


def test_name_defined_only_before_start_is_undefined() -> None:
    err = parse_error([*constant("a"), START, j(INSTRUCTION="COPY", DST="b", SRC="a")])
    assert_error(err, 4, "a tensor defined earlier in the trace", "'a'")


def test_no_start_annotation() -> None:
    err = parse_error([*constant("a"), j(INSTRUCTION="ANNOTATE", ANNOTATION="BACKWARD")])
    assert_error(err, 3, "an ANNOTATE START line", "none in the whole file")


@pytest.mark.parametrize("data", [b"", b"\n", b"  \n\n"], ids=["empty", "newline", "blank"])
def test_empty_file(data: bytes) -> None:
    assert_error(parse_error(data), 1, "trace instructions", "an empty file")


@pytest.mark.parametrize(
    ("tail", "line", "expected"),
    [
        ([], 5, "MEMORY for 'r'"),
        ([j(INSTRUCTION="MEMORY", NAME="r", MEMORY="1")], 6, "ALIAS for 'r'"),
    ],
    ids=["call-alone", "call-memory"],
)
def test_truncated_call_at_end_of_file(tail: list[str], line: int, expected: str) -> None:
    assert_error(parse_error(call_lines(*tail)), line, expected, "end of file")


def test_truncated_constant_at_end_of_file() -> None:
    err = parse_error([START, j(INSTRUCTION="CONSTANT", NAME="c")])
    assert_error(err, 3, "MEMORY for 'c'", "end of file")


def test_copy_to_existing_name() -> None:
    err = parse_error(
        [START, *constant("a"), *constant("b"), j(INSTRUCTION="COPY", DST="b", SRC="a")]
    )
    assert_error(err, 6, "a COPY destination not defined before", "'b'")


def test_copy_to_released_name_is_still_rejected() -> None:
    # simrd never forgets a name, even once it is released.
    lines = [
        START,
        *constant("a"),
        *constant("b"),
        release("b"),
        j(INSTRUCTION="COPY", DST="b", SRC="a"),
    ]
    assert_error(parse_error(lines), 7, "a COPY destination not defined before", "'b'")


def test_call_result_already_defined() -> None:
    err = parse_error([START, *constant("a"), *call("a", [])])
    assert_error(err, 4, "CALL results not defined before", "'a'")


def test_copy_of_unreferenced_tensor_fails_refcount_check() -> None:
    lines = [START, *call("a", []), release("a"), j(INSTRUCTION="COPY", DST="b", SRC="a")]
    assert_error(parse_error(lines), 6, "a tensor that is still referenced", "a")


def test_double_release_fails_refcount_check() -> None:
    lines = [START, *call("a", []), release("a"), release("a")]
    assert_error(parse_error(lines), 6, "a tensor that is still referenced", "a")


@pytest.mark.parametrize("positions", [[1], [-1], ["0"], [0.0]])
def test_mutate_position_out_of_range(positions: list) -> None:
    mutate = j(INSTRUCTION="MUTATE", NAME="f", ARGS=["a"], MUTATE=positions, TIME="1")
    err = parse_error([START, *call("a", []), mutate])
    assert_error(err, 5, "MUTATE positions from 0 to 0", repr(positions))


def test_non_utf8_bytes() -> None:
    err = parse_error(b"\xff\xfe" + encode([START]))
    assert_error(err, 1, "UTF-8 text", "undecodable byte at offset 0")


def test_non_utf8_bytes_name_their_line() -> None:
    err = parse_error(encode([START, START]) + b"\xff\n")
    assert err.line == 3


@pytest.mark.parametrize(
    "lines",
    [
        [j(INSTRUCTION="CONSTANT", NAME=["a"]), j(INSTRUCTION="MEMORY", NAME=["a"], MEMORY="1")],
        [j(INSTRUCTION="RELEASE", NAME=["a"])],
        [*constant("a"), j(INSTRUCTION="COPY", DST=["b"], SRC="a")],
    ],
    ids=["constant", "release", "copy"],
)
def test_non_string_names_are_trace_errors(lines: list[str]) -> None:
    parse_error([START, *lines])


@pytest.mark.parametrize("time", ["Infinity", '"100000000000000000000000000000"'])
def test_out_of_range_time_is_a_trace_error(time: str) -> None:
    parse_error(
        [START, '{"ARGS":[],"INSTRUCTION":"CALL","NAME":"f","RESULT":[],"TIME":' + time + "}"]
    )
