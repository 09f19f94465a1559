"""The sweep protocol: a dated base plus dated amendments, resolved into versioned parameters."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from dtrholes.study.parameters import Parameters
from simulator import UserError, get_policy

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
BASE = "base.yaml"
AMENDMENTS = "amendments"
_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}-[a-z0-9][a-z0-9-]*\.yaml$")
_ABSENT = object()  # a change's `old` or `new` that is not given: an addition or a removal


class ProtocolError(UserError):
    """A protocol base or amendment that is malformed or does not apply."""


@dataclass(frozen=True)
class Change:
    """One parameter change: `old` absent for an addition, `new` absent for a removal."""

    path: str
    old: Any = _ABSENT
    new: Any = _ABSENT

    def describe(self) -> str:
        if self.old is _ABSENT:
            return f"{self.path}: added {_short(self.new)}"
        if self.new is _ABSENT:
            return f"{self.path}: removed (was {_short(self.old)})"
        return f"{self.path}: {_short(self.old)} -> {_short(self.new)}"


@dataclass(frozen=True)
class Amendment:
    """One dated amendment or execution note; its id is its file name without `.yaml`."""

    id: str
    date: dt.date
    title: str
    kind: str
    reason: str
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class Protocol:
    """The effective protocol: the base's parameters with every amendment applied in order.
    `parameters` is the validated dict (its content hash names the version; job specs are slices
    of it), `params` the same parameters typed, read through attributes."""

    fixed: dt.date
    title: str
    parameters: dict
    history: tuple[Amendment, ...]
    params: Parameters = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", Parameters.from_dict(self.parameters))

    @property
    def version(self) -> str:
        return version_of(self.parameters)

    def value(self, path: str) -> Any:
        """The parameter at a slash-separated path (a KeyError if absent)."""
        node = self.parameters
        for key in path.split("/"):
            node = node[key]
        return node

    def sources(self, paths: list[str]) -> tuple[str, ...]:
        """Ids of the amendments that changed a parameter at, above or below any of `paths`."""
        return tuple(
            a.id for a in self.history if any(_related(c.path, p) for c in a.changes for p in paths)
        )

    def slice(self, paths: list[str]) -> dict:
        """What a job depends on: the values at `paths` (None where absent) and their sources."""
        values = {}
        for path in paths:
            try:
                values[path] = self.value(path)
            except KeyError:
                values[path] = None
        return {"values": values, "amendments": list(self.sources(paths))}


def version_of(parameters: dict) -> str:
    """The content hash that names a protocol version: equal parameters, equal version."""
    canonical = json.dumps(parameters, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def load(directory: str | Path, today: dt.date | None = None) -> Protocol:
    """Read, validate and resolve `directory`/base.yaml and `directory`/amendments/*.yaml."""
    directory = Path(directory)
    today = today or dt.datetime.now(dt.UTC).date()
    base_path = directory / BASE
    base = _read(base_path, "protocol")
    fixed = _date(base["fixed"])
    parameters = base["parameters"]
    _check_parameters(parameters, base_path)
    history, previous = [], fixed
    for path in _amendment_files(directory / AMENDMENTS):
        amendment = _amendment(path, previous, today)
        parameters = _apply(parameters, amendment, path)
        history.append(amendment)
        previous = amendment.date
    return Protocol(fixed, base["title"], parameters, tuple(history))


def _amendment_files(folder: Path) -> list[Path]:
    """The amendments in name order; one saved as .yml or .YAML is an error, not ignored."""
    found = sorted(folder.glob("*")) if folder.is_dir() else []
    for path in found:
        if path.suffix.lower() in (".yaml", ".yml") and path.suffix != ".yaml":
            raise ProtocolError(str(path), "the extension .yaml", path.suffix)
    return [path for path in found if path.suffix == ".yaml"]


def _amendment(path: Path, previous: dt.date, today: dt.date) -> Amendment:
    if not _NAME.match(path.name):
        raise ProtocolError(str(path), "a file name YYYY-MM-DD-slug.yaml", path.name)
    raw = _read(path, "amendment")
    date = _date(raw["date"])
    if str(date) != path.name[:10]:
        raise ProtocolError(f"{path}: date", f"{path.name[:10]}, as its file name says", str(date))
    if date < previous:
        raise ProtocolError(
            str(path), f"a date on or after the previous amendment's ({previous})", str(date)
        )
    if date > today:
        raise ProtocolError(str(path), f"a date not later than today ({today})", str(date))
    changes = tuple(
        Change(c["path"], c.get("old", _ABSENT), c.get("new", _ABSENT)) for c in raw["changes"]
    )
    return Amendment(path.stem, date, raw["title"], raw["kind"], raw["reason"].strip(), changes)


def _apply(parameters: dict, amendment: Amendment, path: Path) -> dict:
    """`parameters` with the amendment's changes applied; each change is checked first."""
    result = copy.deepcopy(parameters)
    for change in amendment.changes:
        where = f"{path}: {change.path}"
        *parents, key = change.path.split("/")
        node = result
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                raise ProtocolError(where, "a known parameter path", f"no parameter {part!r}")
        if not isinstance(node, dict):
            raise ProtocolError(where, "a path through parameter groups", "a value on the way")
        current = node.get(key, _ABSENT)
        if change.old is _ABSENT and current is not _ABSENT:
            raise ProtocolError(where, "an addition of a new parameter", "an existing one")
        if change.old is not _ABSENT and current is _ABSENT:
            raise ProtocolError(where, "a known parameter path", f"no parameter {key!r}")
        if change.old is not _ABSENT and current != change.old:
            raise ProtocolError(where, f"old value {_short(current)}", _short(change.old))
        if change.new is _ABSENT:
            del node[key]
        else:
            node[key] = copy.deepcopy(change.new)
    _check_parameters(result, path)
    return result


def _check_parameters(parameters: dict, path: Path) -> None:
    defs = _schema("protocol")["$defs"]
    _validate(parameters, {"$defs": defs, "$ref": "#/$defs/parameters"}, path)
    params = Parameters.from_dict(parameters)
    for name in params.policies:
        where = f"{path}: policies/{name}"
        try:
            chosen = get_policy(params.policy_ref(name))
            chosen.resolve(params.policy_values(name))
        except UserError as exc:
            raise ProtocolError(where, exc.expected, f"{exc.found} ({exc.where})") from None
        if chosen.name != name:
            raise ProtocolError(where, f"a policy named {name!r}", repr(chosen.name))
    if "stage_c" in params.stage_b.triggers and params.stage_c is None:
        raise ProtocolError(f"{path}: stage_b/triggers", "stage_c defined", "no stage_c")
    _check_names(params, path)


def _check_names(params: Parameters, path: Path) -> None:
    """The frozen policies and every point set name policies and traces the protocol has."""
    policies, traces = list(params.policies), list(params.traces.every)
    for name in params.frozen:
        if name not in policies:
            raise ProtocolError(f"{path}: frozen", f"one of the policies {policies}", name)
    for stage, sets in params.points.items():
        for i, spec in enumerate(sets):
            where = f"{path}: points/{stage}/{i}"
            if spec.trace not in traces:
                raise ProtocolError(where, f"one of the traces {traces}", spec.trace)
            unknown = [p for p in spec.policies if p not in policies]
            if spec.policies != "all" and unknown:
                raise ProtocolError(where, f"policies among {policies}", unknown[0])


def _read(path: Path, kind: str) -> dict:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ProtocolError(
            where, f"a readable YAML {kind}", exc.problem or "a YAML error"
        ) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError) as exc:  # bad YAML dates
        raise ProtocolError(str(path), f"a readable YAML {kind}", _first_line(exc)) from None
    _validate(raw, _schema(kind), path)
    return raw


def _validate(value: object, schema: dict, path: Path) -> None:
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    error = jsonschema.exceptions.best_match(validator.iter_errors(_plain(value)))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ProtocolError(f"{path}: {where}", "a value valid against its schema", error.message)


def _plain(value: object) -> object:
    """YAML dates as ISO strings, so that the schema sees what the file says."""
    return json.loads(json.dumps(value, default=str))


def _date(value: object) -> dt.date:
    """A schema-checked date as YAML gave it (a date, or its ISO string)."""
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))


@cache
def _schema(kind: str) -> dict:
    return yaml.safe_load((SCHEMAS / f"{kind}.schema.yaml").read_text(encoding="utf-8"))


def _related(a: str, b: str) -> bool:
    """Whether one path is the other or lies inside it."""
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def _short(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def render(protocol: Protocol) -> dict:
    """The effective protocol as plain JSON: version, parameters and the history behind them."""
    return {
        "version": protocol.version,
        "title": protocol.title,
        "fixed": str(protocol.fixed),
        "parameters": protocol.parameters,
        "history": [
            {
                "id": a.id,
                "date": str(a.date),
                "kind": a.kind,
                "title": a.title,
                "changes": [c.describe() for c in a.changes],
            }
            for a in protocol.history
        ],
    }


def describe(protocol: Protocol) -> str:
    """Human-readable effective protocol with its history, for `dtr-holes protocol show`."""
    lines = [
        f"{protocol.title}",
        f"version {protocol.version}; base fixed {protocol.fixed}",
        "",
        "history:",
        f"  {protocol.fixed}  base",
    ]
    for a in protocol.history:
        lines.append(f"  {a.date}  {a.kind:<14} {a.id}: {a.title}")
        lines += [f"      {c.describe()}" for c in a.changes]
    lines += ["", "effective parameters:"]
    dumped = yaml.safe_dump(protocol.parameters, sort_keys=True, default_flow_style=None)
    lines += ["  " + line for line in dumped.splitlines()]
    return "\n".join(lines)
