"""The package's modules import one another in layers, without a cycle.

Every import of a module of the package counts, at any depth: a function's
`from .session import _generate` is as much a cycle as one at the top, only
one that Python resolves late. Read from the sources with `ast`; nothing is
imported."""

from __future__ import annotations

import ast
import pathlib
from typing import Dict, List, Optional, Set

PACKAGE = "specdec"
PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[1] / PACKAGE


def module_imports(tree: ast.AST, modules: Set[str]) -> Set[str]:
    """The package's modules that a module's code imports. `from . import x`,
    `from .x import y`, `import specdec.x` and `from specdec.x import y` name
    x; a name of the package that is not a module (`from . import Engine`)
    names the package itself, "__init__"."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == PACKAGE:
                    found.add(parts[1] if len(parts) > 1 else "__init__")
        elif isinstance(node, ast.ImportFrom):
            if node.level > 0:  # the package has no subpackages: every level names it
                parts = (node.module or "").split(".")
            elif node.module and node.module.split(".")[0] == PACKAGE:
                parts = node.module.split(".")[1:]
            else:
                continue
            if parts and parts[0]:
                found.add(parts[0])
            else:
                found.update(a.name if a.name in modules else "__init__" for a in node.names)
    return found


def package_graph() -> Dict[str, Set[str]]:
    modules = {p.stem for p in PACKAGE_DIR.glob("*.py")}
    return {m: module_imports(ast.parse((PACKAGE_DIR / f"{m}.py").read_text(), f"{m}.py"), modules) for m in modules}


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """A cycle of the graph as its nodes, the first repeated at the end; None without one."""
    done: Set[str] = set()
    path: List[str] = []

    def visit(node: str) -> Optional[List[str]]:
        if node in path:
            return path[path.index(node) :] + [node]
        if node in done:
            return None
        path.append(node)
        for succ in sorted(graph.get(node, ())):
            cycle = visit(succ)
            if cycle:
                return cycle
        path.pop()
        done.add(node)
        return None

    for node in sorted(graph):
        cycle = visit(node)
        if cycle:
            return cycle
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_function_level_imports_are_counted():
    source = "def f():\n    from .session import _generate\n    import specdec.engine\n    from . import _native, Engine\n"
    assert module_imports(ast.parse(source), {"session", "engine", "_native"}) == {"session", "engine", "_native", "__init__"}


def test_the_package_has_no_import_cycle():
    graph = package_graph()
    assert {"__init__", "session", "engine"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
