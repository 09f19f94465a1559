"""The simulator's tests import nothing of the workflow, as the simulator itself does not."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
MODULES = sorted(f"tests.simulator.{p.stem}" for p in HERE.glob("*.py") if p.stem != "__init__")


def imported(path: Path) -> set[str]:
    """The top-level packages a file names in its import statements, wherever they are."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def test_no_simulator_test_names_the_workflow() -> None:
    named = {p.name: imported(p) for p in sorted(HERE.glob("*.py"))}
    assert {name for name, packages in named.items() if "dtrholes" in packages} == set()


def test_importing_every_simulator_test_and_its_fixtures_loads_no_workflow_module() -> None:
    script = (
        "import importlib, sys\n"
        f"for name in {['tests.conftest', *MODULES]!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'dtrholes'))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert run.stdout == "[]\n"
