#!/usr/bin/env python3
"""The module graph of each workspace crate, and its cycles.

A module is a file under `src/` (a `mod.rs` names its folder); an edge
A -> B means A names `crate::B…` (in a `use` or a path) or, inside a
folder, `super::B`. Cycles are the strongly connected components with more
than one module. Usage: `scripts/modgraph.py [--dot] [CRATE_DIR…]`; exits 1
when any crate has a cycle, so the test command can hold the line.
"""
import os
import re
import sys


def modules(src):
    mods = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel[0] == "bin":
                continue
            if rel[-1] == "mod":
                rel = rel[:-1]
            if rel in (["lib"], ["main"]):
                continue
            mods["::".join(rel)] = path
    return mods


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//")[0] for line in text.splitlines())


def edges(mods):
    names = set(mods)
    graph = {m: set() for m in mods}
    for m, path in mods.items():
        text = strip_comments(open(path).read())
        # `#[cfg(test)] mod tests { … }` at the end of a file may use anything.
        cut = re.search(r"#\[cfg\(test\)\]\s*mod tests", text)
        if cut:
            text = text[: cut.start()]
        parts = m.split("::")
        refs = []
        for a in re.finditer(r"crate::((?:\w+::)*\w+)", text):
            refs.append(a.group(1).split("::"))
        # `use crate::{a, b::c}` groups
        for g in re.finditer(r"crate::\{([^}]*)\}", text):
            for item in g.group(1).split(","):
                item = item.strip()
                if item:
                    refs.append(item.split("::"))
        for s in re.finditer(r"\bsuper::((?:\w+::)*\w+)", text):
            base = parts[:-1] if not path.endswith("mod.rs") else parts
            base = base[:-1] if path.endswith("mod.rs") else base
            refs.append(base + s.group(1).split("::"))
        for r in refs:
            # the longest prefix that is a module
            for k in range(len(r), 0, -1):
                cand = "::".join(r[:k])
                if cand in names:
                    if cand != m and not m.startswith(cand + "::") and not cand.startswith(m + "::"):
                        graph[m].add(cand)
                    break
    return graph


def sccs(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    dot = "--dot" in sys.argv
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workbench")
    crates = args or sorted(os.path.join(root, c) for c in os.listdir(root))
    bad = 0
    for c in crates:
        src = os.path.join(c, "src")
        if not os.path.isdir(src):
            continue
        g = edges(modules(src))
        # Folders are modules too: the graph of top-level modules (an edge
        # from any module inside one to any inside another) must be acyclic.
        top = {}
        for a, bs in g.items():
            ta = a.split("::")[0]
            top.setdefault(ta, set())
            for b in bs:
                tb = b.split("::")[0]
                top.setdefault(tb, set())
                if ta != tb:
                    top[ta].add(tb)
        cyc = sccs(g) + [["(top) " + m for m in c] for c in sccs(top) if c not in sccs(g)]
        name = os.path.basename(os.path.normpath(c))
        nedges = sum(len(v) for v in g.values())
        print(f"{name}: {len(g)} modules, {nedges} edges, {'no cycle' if not cyc else f'{len(cyc)} cycle(s)'}")
        for comp in cyc:
            bad += 1
            print(f"  cycle: {' <-> '.join(comp)}")
            for a in comp:
                graph, key = (top, a[6:]) if a.startswith("(top) ") else (g, a)
                inside = [c[6:] if c.startswith("(top) ") else c for c in comp]
                print(f"    {key} -> {', '.join(sorted(b for b in graph[key] if b in inside))}")
        if dot:
            for a in sorted(g):
                for b in sorted(g[a]):
                    print(f"  {a} -> {b}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
