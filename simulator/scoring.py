"""Score functions of named candidate features, rewritten and compiled into the kernel's scan.

A policy's score is a Python function of one candidate `c` (its features read as `c.size`,
`c.estar`, ...) and the policy's parameters. `analyse` checks it and lists what it reads;
`generate` writes it as kernel code: features become reads of the kernel's arrays, `/` and
`*` keep Python's integer semantics (`exactdiv`). A `ScoreSet` is the generated module of a
tuple of policies, passed to the kernel beside the replay's setting: its numba type is keyed by
the sha256 of the generated source, of the code generating it and of the kernel's, so numba
compiles one specialised replay per set, caches it on disk under that key, and a fresh process
with the same set and kernel loads it instead of compiling.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import math
import os
import sys
import textwrap
import warnings
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import ModuleType

from numba import types
from numba.core.errors import NumbaIRAssumptionWarning
from numba.extending import NativeValue, models, overload, register_model, typeof_impl, unbox

from simulator.errors import PolicyError

# numba's IR inliner flags conditional expressions inlined into a caller with this pedantic
# internal check ("variable ... is not in scope"); the compiled code is right (every simrd
# reference line replays), and the warning would reach every user compiling a policy.
warnings.filterwarnings("ignore", category=NumbaIRAssumptionWarning)

SCAN, COVERING, UNCENTRAL = 0, 1, 2  # how a policy chooses among its scores (see kernel.choice)
BUDGET_DEPENDENT = frozenset({"budget", "shortfall"})


@dataclass(frozen=True)
class Feature:
    """One named feature of an eviction candidate, as a policy reads it (`c.<name>`)."""

    name: str
    doc: str
    symbol: str  # in the DTR paper's notation where it has one
    kernel: str  # its value in the generated code (see `_SIGNATURE`)
    reads: frozenset[str] = frozenset()  # state the kernel maintains or settles for it


def _feature(name: str, doc: str, symbol: str, kernel: str, *reads: str) -> Feature:
    return Feature(name, doc, symbol, kernel, frozenset(reads))


FEATURES: dict[str, Feature] = {
    f.name: f
    for f in (
        _feature("compute", "cost of the call that computes the storage", "c(t)", "sv[COMPUTE, s]"),
        _feature("size", "bytes of the storage", "m(t)", "stor[S_SIZE, s]"),
        _feature("staleness", "clock time since its last access", "s(t)", "clock - sv[LAST, s]"),
        _feature("last_access", "clock time of its last access", "", "sv[LAST, s]"),
        _feature(
            "estar",
            "its compute plus its evicted neighbourhood's (both regions)",
            "c(e*)",
            "sv[COMPUTE, s] + fwd_c + rev_c",
            "forward",
            "reverse",
        ),
        _feature(
            "nbhd", "storages in its evicted neighbourhood", "|e*|", "count", "forward", "reverse"
        ),
        _feature(
            "forward_compute",
            "compute of the evicted region past its children",
            "",
            "fwd_c",
            "forward",
        ),
        _feature(
            "reverse_compute",
            "compute of the evicted region behind its parents",
            "",
            "rev_c",
            "reverse",
        ),
        _feature(
            "class_estar",
            "its compute plus the values of its evicted neighbours' equivalence classes",
            "c(ẽ*)",
            "class_value",
            "eqclass",
        ),
        _feature("times_evicted", "evictions of it so far by the policy", "", "sv[EVICTED, s]"),
        _feature(
            "centrality",
            "betweenness rank, 0 = the most central storage",
            "",
            "rank[s]",
            "centrality",
        ),
        _feature("memory", "bytes in use when the policy is asked", "", "g[MEM]"),
        _feature("request", "bytes the waiting operator asks for", "", "request"),
        _feature("budget", "the memory budget (bytes)", "B", "budget", "budget"),
        _feature(
            "shortfall",
            "memory + request - budget, bytes still to free",
            "",
            "g[MEM] + request - budget",
            "budget",
        ),
    )
}

# The arguments of every generated score function (see kernel.candidates.score).
_SIGNATURE = (
    "s, clock, class_value, params, rank, sv, stor, g, fwd_c, rev_c, count, budget, request"
)
_ALLOWED_BUILTINS = frozenset({"abs", "bool", "float", "int", "max", "min", "pow", "round"})


@dataclass(frozen=True)
class Analysis:
    """What a score function reads, and its body as kernel code."""

    features: frozenset[str]
    params: tuple[str, ...]
    body: str  # the rewritten body, statements at indentation 0
    constants: tuple[tuple[str, str], ...]  # global name -> source of its value
    file: str
    line: int

    @cached_property
    def reads(self) -> frozenset[str]:
        return frozenset().union(*(FEATURES[f].reads for f in self.features))


def analyse(function, declared: tuple[str, ...]) -> Analysis:
    """Check a score function's source and rewrite it; PolicyError naming file:line if it reads
    an unknown feature, uses its candidate other than as `c.<feature>`, takes other parameters
    than `declared` (in order) or reads a global that is not a number or the math module."""
    file, first, tree = _parse(function)
    line = first + tree.lineno - 1  # the def's, below its decorators
    args = tree.args
    names = [a.arg for a in args.posonlyargs + args.args]
    if args.vararg or args.kwarg or args.kwonlyargs or args.defaults or not names:
        raise PolicyError(f"{file}:{line}", "def f(c, <parameters>) without defaults", "other")
    if tuple(names[1:]) != declared:
        expected = "parameters " + (", ".join(("c",) + declared))
        raise PolicyError(f"{file}:{line}", expected, ", ".join(names))
    rewriter = _Rewriter(names[0], file, first - 1)
    body = [rewriter.visit(statement) for statement in tree.body]
    constants = _constants(function, body, set(names), file, first - 1)
    source = "\n".join(ast.unparse(ast.fix_missing_locations(s)) for s in body)
    return Analysis(frozenset(rewriter.features), declared, source, constants, file, line)


def definition(function) -> str:
    """file:line of a function's def."""
    file, first, tree = _parse(function)
    return f"{file}:{first + tree.lineno - 1}"


def _parse(function) -> tuple[str, int, ast.FunctionDef]:
    """The function's file, the line its source starts on (its first decorator's), and its
    def without decorators or docstring."""
    try:
        lines, line = inspect.getsourcelines(function)
        file = inspect.getsourcefile(function) or "<unknown>"
    except (OSError, TypeError) as error:
        raise PolicyError(
            repr(function), "a function defined in a Python file", str(error)
        ) from None
    tree = ast.parse(textwrap.dedent("".join(lines)))
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise PolicyError(f"{file}:{line}", "a plain def (not a lambda or async def)", "other")
    node.decorator_list = []
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        node.body = node.body[1:] or [ast.Pass()]  # a docstring is not code
    return relative(file), line, node


def relative(file: str) -> str:
    """A file's path as messages name it: relative to the working directory when inside it."""
    path = Path(file)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


class _Rewriter(ast.NodeTransformer):
    """`c.<feature>` -> a local; `/` and `*` -> Python's integer semantics (see exactdiv)."""

    def __init__(self, candidate: str, file: str, offset: int):
        self.candidate, self.file, self.offset = candidate, file, offset
        self.features: set[str] = set()

    def _where(self, node: ast.AST) -> str:
        return f"{self.file}:{self.offset + getattr(node, 'lineno', 1)}"

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == self.candidate:
            if node.attr not in FEATURES:
                expected = "a feature among " + ", ".join(FEATURES)
                raise PolicyError(self._where(node), expected, f"{self.candidate}.{node.attr}")
            self.features.add(node.attr)
            return ast.copy_location(ast.Name(f"_c_{node.attr}", ast.Load()), node)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == self.candidate:
            expected = f"the candidate read only as {self.candidate}.<feature>"
            raise PolicyError(self._where(node), expected, f"{self.candidate} itself")
        if node.id.startswith("_c_"):
            raise PolicyError(self._where(node), "names not starting with _c_", node.id)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        node = self.generic_visit(node)
        if isinstance(node.op, ast.Div):
            right = node.right  # a product, already rewritten: divide by it exactly
            if isinstance(right, ast.Call) and getattr(right.func, "id", "") == "_multiply":
                args = [node.left, *right.args]
                return ast.copy_location(_call("_divide_product", args), node)
            return ast.copy_location(_call("_divide", [node.left, node.right]), node)
        if isinstance(node.op, ast.Mult):
            return ast.copy_location(_call("_multiply", [node.left, node.right]), node)
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        target = ast.Name(node.target.id, ast.Load()) if isinstance(node.target, ast.Name) else None
        if target is None or not isinstance(node.op, ast.Div | ast.Mult):
            return self.generic_visit(node)
        value = self.visit(ast.BinOp(target, node.op, node.value))
        return ast.copy_location(ast.Assign([node.target], value), node)

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        raise PolicyError(self._where(node), "no lambda in a score function", "a lambda")


def _call(name: str, args: list[ast.expr]) -> ast.Call:
    return ast.Call(ast.Name(name, ast.Load()), args, [])


def _constants(function, body, local: set[str], file: str, offset: int):
    """The function's free names: builtins and math stay, numbers become constants."""
    assigned = {
        n.id
        for s in body
        for n in ast.walk(s)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    constants = {}
    for node in (n for s in body for n in ast.walk(s)):
        if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load):
            continue
        name = node.id
        if name in local or name in assigned or name.startswith("_c_") or name in constants:
            continue
        if name.startswith("_"):  # _divide etc., put there by the rewriter
            continue
        where = f"{file}:{offset + node.lineno}"
        if name not in function.__globals__:
            if name in _ALLOWED_BUILTINS:
                continue
            expected = "a number of the file, math or one of " + ", ".join(
                sorted(_ALLOWED_BUILTINS)
            )
            raise PolicyError(where, expected, f"undefined name {name}")
        constants[name] = _constant(function.__globals__[name], where, name)
    return tuple(sorted(constants.items()))


def _constant(value, where: str, name: str) -> str:
    if value is math:
        return "math"
    if isinstance(value, bool) or not isinstance(value, int | float):
        if callable(value) and getattr(math, getattr(value, "__name__", ""), None) is value:
            return f"math.{value.__name__}"
        expected = "a number, the math module or a function of it"
        raise PolicyError(where, expected, f"{name} = {type(value).__name__}")
    if isinstance(value, float):
        return f"float.fromhex({value.hex()!r})" if math.isfinite(value) else f"float({value!r})"
    return repr(value)


# ---------------------------------------------------------------- generated code


@dataclass(frozen=True)
class Compiled:
    """What the kernel needs of one policy: its rule, what it reads, its analysed score."""

    name: str
    rule: int  # SCAN, COVERING or UNCENTRAL
    monotone: bool  # its score never falls when a region grows (pruning is exact)
    analysis: Analysis


def generate(members: tuple[Compiled, ...]) -> str:
    """The source of the module scoring `members` (index i = the kernel's policy id i)."""
    head = [
        '"""Generated by simulator.scoring; policies: '
        + ", ".join(m.name for m in members)
        + '."""',
        "import math",
        "from numba import njit",
        "from simulator.exactdiv import checked_multiply as _multiply",
        "from simulator.exactdiv import true_divide as _divide",
        "from simulator.exactdiv import true_divide_product as _divide_product",
        "from simulator.kernel.state import COMPUTE, EVICTED, LAST, MEM",
        "from simulator.layout import S_SIZE",
    ]
    rules = tuple(m.rule for m in members)
    parts = ["\n".join(head), f"RULES = {rules!r}  # how each policy chooses (see kernel.choice)"]
    for i, member in enumerate(members):
        parts.append(_function(i, member.analysis))
    parts.append(_dispatch(members))
    return "\n\n\n".join(parts) + "\n"


def _function(i: int, a: Analysis) -> str:
    lines = [f"{name} = {value}" for name, value in a.constants if name != value]
    lines += [f"_c_{f} = {FEATURES[f].kernel}" for f in sorted(a.features)]
    lines += [f"{p} = params[{k}]" for k, p in enumerate(a.params)]
    lines += a.body.splitlines()
    body = textwrap.indent("\n".join(lines), "    ")
    return (
        f"@njit(inline='always')\ndef _score_{i}({_SIGNATURE}):\n{body}\n\n\n"
        f"@njit(inline='always')\ndef score_{i}({_SIGNATURE}):\n"
        f"    return float(_score_{i}({_SIGNATURE}))\n\n\n"
        f"@njit\ndef called_{i}({_SIGNATURE}):\n    return float(_score_{i}({_SIGNATURE}))"
    )


def _dispatch(members: tuple[Compiled, ...]) -> str:
    """`score` and `flags` by policy id, and `flags_<id>`. Kernel code given a
    constant id inlines `score_<id>` and `flags_<id>` (see _delegated); given an id known only
    at run time (explanations' events, the kernel-level rules) it calls `called_<id>`, each
    compiled once, so that no call site inlines every policy's score."""
    score = [f"def score(policy, {_SIGNATURE}):"]
    flags = ["def flags(policy):"]
    constants = []
    for i, m in enumerate(members):
        reads = m.analysis.reads
        values = (
            m.rule,
            "forward" in reads,
            "reverse" in reads,
            "eqclass" in reads,
            m.monotone,
            "budget" in reads,
        )
        test = f"    {'if' if i == 0 else 'elif'} policy == {i}:"
        score += [test, f"        return called_{i}({_SIGNATURE})"]
        flags += [test, f"        return {values!r}"]
        constants.append(f"@njit(inline='always')\ndef flags_{i}():\n    return {values!r}")
    functions = constants
    for lines in (score, flags):
        lines += ["    raise ValueError('unknown policy id')"]
        functions.append("@njit(inline='always')\n" + "\n".join(lines))
    return "\n\n\n".join(functions)


# The code a replay compiled for a set is made of, besides the generated source: numba's cache
# checks only the file of the function it caches (the kernel's replay).
_GLUE = ("scoring.py", "exactdiv.py", "layout.py", "kernel/*.py")


class ScoreSet:
    """The generated module of a tuple of policies, as the kernel receives it."""

    def __init__(self, members: tuple[Compiled, ...], directory: Path):
        source = generate(members)
        here = Path(__file__).parent
        glue = b"".join(p.read_bytes() for n in _GLUE for p in sorted(here.glob(n)))
        self.key = hashlib.sha256(source.encode() + glue).hexdigest()
        self.path = directory / f"scores_{self.key[:32]}.py"
        if not self.path.exists():
            directory.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_suffix(f".{os.getpid()}.tmp")
            partial.write_text(source, encoding="utf-8")
            os.replace(partial, self.path)
        self.members = members
        self.numba_type = ScoreSetType(self.key, str(self.path))  # typed at every replay call
        load(str(self.path))  # compiled code loaded from numba's cache imports it by name

    def __repr__(self) -> str:
        return f"ScoreSet({', '.join(m.name for m in self.members)})"


def cache_directory() -> Path:
    """Where generated modules live: $DTR_HOLES_POLICY_CACHE, else beside the package (as
    numba's cache), else, where the package cannot be written, in the user's cache."""
    given = os.environ.get("DTR_HOLES_POLICY_CACHE")
    if given:
        return Path(given)
    beside = Path(__file__).resolve().parent / "__pycache__" / "policies"
    if os.access(beside.parents[1], os.W_OK):
        return beside
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return home / "dtr-holes" / "policies"


def load(path: str) -> ModuleType:
    """The generated module at `path`, imported once per process."""
    name = "simulator._scores_" + Path(path).stem.removeprefix("scores_")
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


class ScoreSetType(types.Dummy):
    """A ScoreSet's numba type: equal for equal generated sources, across processes."""

    def __init__(self, key: str, path: str):
        self.path = path
        super().__init__(name=f"ScoreSet({key})")


register_model(ScoreSetType)(models.OpaqueModel)


@typeof_impl.register(ScoreSet)
def _typeof(value: ScoreSet, context) -> ScoreSetType:
    return value.numba_type


@unbox(ScoreSetType)
def _unbox(typ, obj, c):
    return NativeValue(c.context.get_dummy_value())


def _literal_policy(expr, caller, callee) -> bool:
    """Inline a call whose policy id is a constant (one policy's code, in its own scan); call
    the others (inlining every policy's dispatch at each such site took minutes to compile)."""
    return isinstance(callee.signature.args[1], types.IntegerLiteral)


def _delegated(name: str, arguments: str, call: str, doc: str, inline="never"):
    """A function of (scores, policy, <arguments>) that kernel code calls: numba compiles it
    as the call `<call>` of the generated module's `name`, or, where the policy id is a
    constant (a scan inlined for one policy), of `<name>_<id>` without the policy: each scan
    then holds its own policy's code only. Written out, as numba wants the same explicit
    arguments in a stub, its overload and the implementation."""
    arguments = f"scores, policy{', ' if arguments else ''}{arguments}"
    source = f"""
def {name}({arguments}):
    \"\"\"{doc}\"\"\"


def typed({arguments}):
    module = load(scores.path)
    if isinstance(policy, types.IntegerLiteral):
        own = getattr(module, f"{name}_{{policy.literal_value}}", None)
        if own is not None:
            def implementation({arguments}):
                return own({call.removeprefix("policy").lstrip(", ")})

            return implementation
    target = getattr(module, "{name}")

    def implementation({arguments}):
        return target({call})

    return implementation
"""
    namespace = {"load": load, "types": types}
    exec(source, namespace)
    overload(namespace[name], inline=inline, prefer_literal=True)(namespace["typed"])
    return namespace[name]


score = _delegated(
    "score",
    _SIGNATURE,
    f"policy, {_SIGNATURE}",
    "The score of policy id `policy` (see generate).",
    inline=_literal_policy,
)
flags = _delegated(
    "flags",
    "",
    "policy",
    "(rule, reads forward, reads reverse, reads classes, monotone, reads the budget)",
)
