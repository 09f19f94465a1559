"""Small simrd logs, as text and written to files, for the command-line and centrality tests."""

from __future__ import annotations

from pathlib import Path

from tests.support.tracegen import line as j


def chain_lines(n: int = 6) -> list[str]:
    """x0 -> x1 -> ... -> x{n-1}, 100 bytes and 10 time units each; only the last is an output.

    Peak memory is n * 100 (nothing is released until the end). At a budget of 200 the run
    completes only by evicting x0 .. x{n-3} in that order (the argument of each operator is
    pinned while it runs, so every choice is forced); below 200 one operator cannot run at all.
    """
    lines = [j(INSTRUCTION="ANNOTATE", ANNOTATION="START")]
    for i in range(n):
        args = [f"x{i - 1}"] if i else []
        lines.append(j(INSTRUCTION="CALL", RESULT=[f"x{i}"], NAME="op", ARGS=args, TIME="10"))
        lines.append(j(INSTRUCTION="MEMORY", NAME=f"x{i}", MEMORY="100"))
        lines.append(j(INSTRUCTION="ALIAS", NAME=f"x{i}", ALIAS="-1"))
    lines += [j(INSTRUCTION="RELEASE", NAME=f"x{i}") for i in range(n - 1)]
    return lines


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


# a -> b -> c, and a -> c directly; b, then c, are the only storages in between.
CENTRALITY_CHAIN = "\n".join(
    [
        '{"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}',
        '{"ARGS":[],"INSTRUCTION":"CALL","NAME":"f","RESULT":["a"],"TIME":"5"}',
        '{"INSTRUCTION":"MEMORY","MEMORY":"10","NAME":"a"}',
        '{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"a"}',
        '{"ARGS":["a"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["b"],"TIME":"1"}',
        '{"INSTRUCTION":"MEMORY","MEMORY":"10","NAME":"b"}',
        '{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"b"}',
        '{"ARGS":["b"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["c"],"TIME":"1"}',
        '{"INSTRUCTION":"MEMORY","MEMORY":"10","NAME":"c"}',
        '{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"c"}',
        '{"ARGS":["c"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["d"],"TIME":"7"}',
        '{"INSTRUCTION":"MEMORY","MEMORY":"10","NAME":"d"}',
        '{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"d"}',
    ]
)
