"""The import graph of suite/: no circle, and the layers' one direction of dependency.

Every import counts, a function-level one too (it is a dependency all the same, only later). The compiler and its
cache (suite/nvrtc) sit below the kernel contract: they import nothing of the suite outside suite/nvrtc.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parent.parent / "suite"


def module_name(path: Path) -> str:
    parts = path.relative_to(SUITE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """The suite modules ``path`` imports, anywhere in it (``from suite.x import y`` counts y when it is a module)."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for name in names:
            while name and name not in modules:  # suite.x.y -> suite.x: the module that holds it
                name = name.rpartition(".")[0]
            if name and name != here and name != "suite":
                found.add(name)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in SUITE.rglob("*.py")}
    return {name: imports(path, set(files)) for name, path in files.items()}


def test_the_import_graph_is_read(graph):
    """The parse sees what a reader sees: the CLI imports the driver, the registry its registrations."""
    assert "suite.driver.sweep" in graph["suite.run"]  # a function-level import
    assert "suite.registration" in graph["suite.registry"]
    assert "suite.nvrtc.cache" in graph["suite.nvrtc.loader"]


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node], _ = 1, path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node], _ = 2, path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_cycle_finds_a_circle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_circle(graph):
    assert cycle(graph) is None, " -> ".join(cycle(graph) or [])


def test_the_compiler_imports_nothing_above_it(graph):
    above = {
        name: sorted(m for m in deps if not m.startswith("suite.nvrtc"))
        for name, deps in graph.items()
        if name.startswith("suite.nvrtc")
    }
    assert not {k: v for k, v in above.items() if v}


def test_kernels_know_nothing_of_the_driver(graph):
    up = ("suite.driver", "suite.run", "suite.merge", "suite.report", "suite.registry", "suite.plugins")
    wrong = {
        name: sorted(m for m in deps if m.startswith(up))
        for name, deps in graph.items()
        if name.startswith(("suite.ptx", "suite.triton"))
    }
    assert not {k: v for k, v in wrong.items() if v}


CLI = ("suite.run", "suite.merge", "suite.report", "suite.sanitize")


def test_each_layer_imports_only_below_it(graph):
    """The registry and everything under it know nothing of the driver; the driver nothing of the CLI."""
    wrong = {}
    for name, deps in graph.items():
        if name.startswith(("suite.driver", *CLI)):
            above = CLI if name.startswith("suite.driver") else ()
        else:
            above = ("suite.driver", *CLI)
        if bad := sorted(m for m in deps if m.startswith(above) and m != name):
            wrong[name] = bad
    assert not wrong
