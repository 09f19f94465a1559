"""The dtrholes packages import only what their docstrings allow: a layering without cycles."""

from __future__ import annotations

import ast
from pathlib import Path

import dtrholes

PACKAGE = Path(dtrholes.__file__).resolve().parent
# What each package may import of dtrholes besides itself, as its __init__ docstring says.
ALLOWED = {
    "core": set(),
    "traces": {"core"},
    "study": {"core", "traces"},
    "holes": {"core", "traces", "study"},
    "explain": {"core"},
    "pipeline": {"core", "traces", "study", "holes", "explain"},
    "report": {"core", "traces", "study", "holes", "explain"},
    "audit": {"core", "traces", "study", "holes", "explain", "pipeline", "report"},
    "cli": {"core", "traces", "study", "holes", "explain", "pipeline", "report", "audit"},
}
ALONE = {"traces/recost.py", "traces/pytorch.py"}  # the simulator alone


def dtrholes_imports(path: Path) -> set[str]:
    """The dtrholes packages a module names in its import statements, wherever they are."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        found |= {n.split(".")[1] for n in names if n.startswith("dtrholes.")}
    return found


def test_every_package_is_in_the_layering() -> None:
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert packages == set(ALLOWED)


def test_each_package_imports_only_the_packages_below_it() -> None:
    broken = {}
    for package, allowed in ALLOWED.items():
        for path in sorted((PACKAGE / package).rglob("*.py")):
            name = str(path.relative_to(PACKAGE))
            extra = dtrholes_imports(path) - allowed - {package}
            if name in ALONE:
                extra = dtrholes_imports(path)
            if extra:
                broken[name] = sorted(extra)
    assert broken == {}


def test_each_package_docstring_names_what_it_may_import() -> None:
    for package in ALLOWED:
        doc = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text()))
        assert doc and "May import" in " ".join(doc.split()), package


def test_no_two_modules_share_a_name() -> None:
    roots = [PACKAGE, PACKAGE.parents[1] / "simulator"]
    names = [p.stem for root in roots for p in root.rglob("*.py") if p.stem != "__init__"]
    names += [p.name for root in roots for p in root.rglob("*") if (p / "__init__.py").exists()]
    assert sorted(n for n in set(names) if names.count(n) > 1 and n != "__main__") == []
