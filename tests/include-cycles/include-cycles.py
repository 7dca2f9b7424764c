#!/usr/bin/env python3
"""Fails when the C and C++ sources of src/, include/ and tools/ include one
another in a cycle.

    include-cycles.py [ROOT]    (ROOT: the repository, default this checkout)

Every quoted #include that names a file of those trees is an edge. The name is
looked up as the compiler looks up a quoted include: beside the including
file, then in the include directories, here every directory of the three
trees (include/ for "specdec/specdec.h", tools/specdec for "cli-common.h");
found in none it is outside the repository (llama.cpp's "llama.h") and
skipped, found in several it is ambiguous, an error. Prints the cycle and
exits 1; exits 0 without one. Python 3's standard library only.
"""

import pathlib
import re
import sys

TREES = ("src", "include", "tools")
SUFFIXES = {".h", ".hpp", ".c", ".cpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def resolve(root, source, name, search):
    """The file of the repository `#include "name"` in `source` names, or None."""
    beside = (source.parent / name).resolve()
    if beside.is_file():
        return beside
    found = [(d / name).resolve() for d in search if (d / name).is_file()]
    if len(set(found)) > 1:
        listed = ", ".join(str(f.relative_to(root)) for f in sorted(set(found)))
        raise SystemExit(f'{source.relative_to(root)}: #include "{name}" is ambiguous: {listed}')
    return found[0] if found else None


def include_graph(root):
    files = sorted(p.resolve() for t in TREES for p in (root / t).rglob("*") if p.suffix in SUFFIXES and p.is_file())
    search = sorted({d for t in TREES if (root / t).is_dir() for d in [root / t, *(root / t).rglob("*")] if d.is_dir()})
    graph = {}
    for f in files:
        names = INCLUDE.findall(f.read_text(encoding="utf-8", errors="replace"))
        targets = (resolve(root, f, name, search) for name in names)
        graph[f] = {t for t in targets if t is not None and t != f}
    return graph


def find_cycle(graph):
    """A cycle of the graph as its nodes, the first repeated at the end; None without one."""
    done, path = set(), []

    def visit(node):
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


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2]).resolve()
    graph = include_graph(root)
    cycle = find_cycle(graph)
    if cycle:
        print("include cycle: " + " -> ".join(str(f.relative_to(root)) for f in cycle))
        return 1
    edges = sum(len(targets) for targets in graph.values())
    print(f"no include cycle: {len(graph)} files, {edges} includes within the repository")
    return 0


if __name__ == "__main__":
    sys.exit(main())
