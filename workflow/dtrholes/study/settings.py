"""The run settings (config/config.yaml and --config): checked against their schema and against
the trace sheet and protocol they name, each mistake reported as one line naming the key."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jsonschema
import yaml

from dtrholes.study import protocol
from dtrholes.traces import fetch
from simulator import UserError

SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"
_TRACE_LISTS = ("traces", "costliest_first", "map_whole")  # keys that name traces of the sheet


@dataclass(frozen=True)
class Settings:
    """What a run works on: the protocol, the trace sheet, and the traces and policies it is
    restricted to (every one the protocol names unless the settings list some)."""

    protocol: protocol.Protocol
    entries: tuple[fetch.TraceEntry, ...]
    traces: tuple[str, ...]
    policies: tuple[str, ...]

    @property
    def own(self) -> dict[str, str]:
        """The own traces (role `own`) the run works on, by name, with their sha256: outside
        the protocol, they run the broader sweep's stages, seeded from the sha256."""
        return {e.name: e.sha256 for e in self.entries if e.role == "own" and e.name in self.traces}


def load(config: dict) -> Settings:
    """Check `config` (filling in the schema's defaults, as Snakemake's validation did) and
    resolve what it names."""
    check(config)
    current = protocol.load(config["protocol"])
    entries = tuple(fetch.read_sheet(config["trace_sheet"]))
    sheet = [e.name for e in entries]
    for key in _TRACE_LISTS:
        _known(key, config[key], sheet, f"the trace sheet's names ({', '.join(sheet)})")
    params = current.params
    known = list(params.policies)
    _known("policies", config["policies"], known, f"the protocol's policies ({', '.join(known)})")
    studied = list(params.traces.every)
    own = [e.name for e in entries if e.role == "own"] if config["own"] else []
    traces = config["traces"] or studied + own
    return Settings(current, entries, tuple(traces), tuple(config["policies"] or known))


def check(config: dict) -> None:
    """The first schema violation as a UserError naming the key; defaults filled in."""
    schema = _schema()
    error = jsonschema.exceptions.best_match(_validator().iter_errors(config))
    if error is not None:
        raise _user_error(error)
    for key, spec in schema["properties"].items():
        if key not in config and "default" in spec:
            config[key] = spec["default"]


def _known(key: str, names: list[str] | None, known: list[str], expected: str) -> None:
    """A list of names, each known; null stands for all, so an empty list is a mistake."""
    if names is None:
        return
    if key in ("traces", "policies") and not names:
        raise UserError(f"config key {key}", "null (every one) or a non-empty list", "[]")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UserError(f"config key {key}", expected, ", ".join(map(str, unknown)))


def _user_error(error: jsonschema.ValidationError) -> UserError:
    path = [str(p) for p in error.absolute_path]
    if error.validator == "required":
        missing = next(k for k in error.validator_value if k not in error.instance)
        return UserError(f"config key {missing}", "a value (the key is required)", "none")
    if error.validator == "additionalProperties":
        unknown = sorted(set(error.instance) - set(error.schema["properties"]))
        known = ", ".join(error.schema["properties"])
        return UserError(
            f"config key {unknown[0]}", f"one of the known keys ({known})", "an unknown key"
        )
    where = f"config key {'/'.join(path)}"
    described = _schema()["properties"].get(path[0], {}).get("description", "") if path else ""
    found = repr(error.instance)
    return UserError(where, f"{_rule(error)} ({' '.join(described.split())})", found)


def _rule(error: jsonschema.ValidationError) -> str:
    value = error.validator_value
    rules = {
        "type": f"a value of type {' or '.join(value) if isinstance(value, list) else value}",
        "minimum": f"a number >= {value}",
        "enum": f"one of {value}",
    }
    return rules.get(error.validator, error.message)


@cache
def _schema() -> dict:
    return yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))


@cache
def _validator() -> jsonschema.protocols.Validator:
    schema = _schema()
    return jsonschema.validators.validator_for(schema)(schema)
