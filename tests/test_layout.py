"""The package's import layering: no module imports one above it, no import circles.

Every module under ``inferasim/`` is parsed (not imported) and every
``import`` statement is collected: at module level, inside functions and
methods (lazy imports), and under ``if TYPE_CHECKING:``. The layers, lowest
first, as in DESIGN.md:

    base (errors, _ragged, _format, style, _run_options) <- workload <- reuse <- sim
    <- sweep / plan <- studies <- plots <- widgets <- figures <- cli / the package

A module may import its own layer or any below it. Within a layer (and
inside a subpackage) the graph of runtime imports, lazy ones included, must
have no cycle; only imports guarded by ``if TYPE_CHECKING:`` (never executed)
are left out of the cycle check.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "inferasim"

#: Layer of each top-level part of the package (lower number = lower layer).
LAYERS: dict[str, int] = {
    "errors": 0,
    "_ragged": 0,
    "_format": 0,
    "style": 0,
    "_validate": 0,  # one check per kind of user number (durations, rates, SLOs, seeds)
    "_run_options": 0,  # Simulator.run's option names (sim.topology, sweep and plan check run=)
    "_interrupt": 0,  # Ctrl-C while the command starts (the entry point and cli)
    "workload": 1,
    "traces": 1,
    "reuse": 2,
    "sim": 3,
    "sweep": 4,
    "plan": 4,
    "_pool": 4,  # sweep's process pool
    "_sweep_store": 4,  # sweep's Parquet store
    "_code_identity": 4,  # what identifies user code in sweep's store keys
    "studies": 5,
    "plots": 6,
    "widgets": 7,
    "figures": 8,
    "headline": 8,  # the figures' headline numbers and README tables (figures writes them)
    "cli": 9,
    "_cli_workload": 1,  # the command line's workload flags (used by sim.command too)
    "_cli_types": 0,  # argparse types of the command line's flags (no imports)
    "__main__": 9,
    "_entry": 9,  # the console script's entry point
    "": 9,  # the package itself (inferasim/__init__.py): the public facade
}


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules(root: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path, name: str, modules: set[str]) -> list[tuple[str, int, bool]]:
    """``(imported module, line, runtime)`` for every import in the file, lazy ones included.

    ``from pkg import x`` counts as importing ``pkg.x`` when that is a module
    of the package, else ``pkg``; relative imports are resolved against the
    module's package. ``runtime`` is False under ``if TYPE_CHECKING:``.
    """
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                guarded.update(id(n) for n in ast.walk(child))
    out = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.append(full if full in modules else base)
        for target in targets:
            if target == "inferasim" or target.startswith("inferasim."):
                # a dotted import of a module inside a subpackage names that module
                while target not in modules and "." in target:
                    target = target.rpartition(".")[0]
                out.append((target, node.lineno, id(node) not in guarded))
    return out


def layer_of(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    if top not in LAYERS:
        raise AssertionError(
            f"{module} belongs to no layer: add {top!r} to LAYERS in tests/test_layout.py"
        )
    return LAYERS[top]


def import_graph(root: Path = PACKAGE) -> dict[str, list[tuple[str, int, bool]]]:
    mods = all_modules(root)
    names = set(mods)
    return {m: imports_of(p, m, names) for m, p in mods.items()}


def layering_violations(graph: dict[str, list[tuple[str, int, bool]]]) -> list[str]:
    bad = []
    for module, edges in graph.items():
        for target, line, _runtime in edges:
            if layer_of(target) > layer_of(module):
                bad.append(f"{module} (line {line}) imports {target}, a higher layer")
    return bad


def find_cycle(
    graph: dict[str, list[tuple[str, int, bool]]],
    ignore: frozenset[tuple[str, str]] = frozenset(),
) -> list[str] | None:
    """One import cycle of runtime edges (as a list of modules), or None."""
    edges = {
        m: sorted({t for t, _l, rt in es if rt and t != m and (m, t) not in ignore})
        for m, es in graph.items()
    }
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for t in edges.get(m, []):
            if state.get(t) == 1:
                return stack[stack.index(t) :] + [t]
            if t not in state:
                found = visit(t)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(edges):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


# --------------------------------------------------------------- the checks
def test_every_module_is_parsed_and_has_a_layer():
    graph = import_graph()
    assert {"inferasim.studies", "inferasim.plots", "inferasim.figures"} <= set(graph)
    for module in graph:
        layer_of(module)
    # lazy imports are seen: figures imports the widgets layer nowhere, plots imports style
    assert any(t == "inferasim.style" for t, _l, _r in graph["inferasim.plots"])


def test_no_module_imports_a_higher_layer():
    assert layering_violations(import_graph()) == []


def test_no_import_cycles_lazy_imports_included():
    # No exceptions: the workload readers return columns and never import
    # workload.core, so the former core <-> reader cycle is gone too.
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle or [])


# ----------------------------------------------- the checker finds violations
def _write(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "inferasim"
    for rel, text in files.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return pkg


def test_checker_catches_an_upward_lazy_import(tmp_path):
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "style.py": "",
            "workload/__init__.py": "",
            "workload/core.py": "def f():\n    from inferasim.figures import FIGURES\n",
            "figures.py": "from inferasim.workload.core import f\n",
        },
    )
    bad = layering_violations(import_graph(pkg))
    assert bad == ["inferasim.workload.core (line 2) imports inferasim.figures, a higher layer"]


def test_checker_catches_a_cycle_through_a_lazy_import(tmp_path):
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "sim/__init__.py": "from inferasim.sim.a import x\n",
            "sim/a.py": "from .b import y\nx = 1\n",
            "sim/b.py": "y = 2\ndef g():\n    from inferasim.sim import a\n",
        },
    )
    assert find_cycle(import_graph(pkg)) == ["inferasim.sim.a", "inferasim.sim.b", "inferasim.sim.a"]


def test_type_checking_imports_count_for_layers_not_for_cycles(tmp_path):
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "reuse/__init__.py": "",
            "plots.py": "",
            "reuse/a.py": "from inferasim.reuse.b import y\n",
            "reuse/b.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from inferasim.reuse.a import x\n    from inferasim.plots import p\ny = 1\n"
            ),
        },
    )
    graph = import_graph(pkg)
    assert find_cycle(graph) is None
    assert layering_violations(graph) == [
        "inferasim.reuse.b (line 4) imports inferasim.plots, a higher layer"
    ]


@pytest.mark.parametrize(
    ("statement", "target"),
    [
        ("from inferasim import style", "inferasim.style"),
        ("from inferasim import Workload", "inferasim"),
        ("import inferasim.reuse.curve", "inferasim.reuse.curve"),
        ("from . import core", "inferasim.workload.core"),
        ("from .core import Workload", "inferasim.workload.core"),
        ("from ..reuse import hit_rate_curve", "inferasim.reuse"),
    ],
)
def test_import_statements_resolve_to_modules(tmp_path, statement, target):
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "style.py": "",
            "reuse/__init__.py": "",
            "reuse/curve.py": "",
            "workload/__init__.py": "",
            "workload/core.py": "",
            "workload/x.py": f"{statement}\n",
        },
    )
    edges = import_graph(pkg)["inferasim.workload.x"]
    assert [t for t, _l, _r in edges] == [target]
