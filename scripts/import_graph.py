#!/usr/bin/env python3
"""The import graph of memprof's Rust modules, and its circles.

Reads every src/**/*.rs, resolves each `crate::`, `super::` and `self::` path to the longest
module that exists, and prints: the edges between folders (layers), the strongly connected
components of more than one module (import circles) at file and at folder level, and the largest
files. Exit status 1 when there is a circle, so that scripts/test.sh can hold the line.

    scripts/import_graph.py            # summary
    scripts/import_graph.py --edges    # every file-level edge too
"""
import os
import re
import sys
from collections import defaultdict

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# The two crates are one tree of modules: the root crate re-exports memprof-report's modules
# under their own names (src/lib.rs), so `crate::model` means the same module in both.
ROOTS = [os.path.join(REPO, "src"), os.path.join(REPO, "crates", "report", "src")]


def module_of(path, root):
    rel = os.path.relpath(path, root)[: -len(".rs")].split(os.sep)
    if rel[-1] in ("mod", "main", "lib"):
        rel = rel[:-1]
    return tuple(rel)


def strip_comments_and_strings(text):
    """The code without its comments and the contents of its string and char literals."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) and \
                re.match(r'r(#*)"', text[i:]):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            out.append('""')
            i = n if end < 0 else end + 1 + len(hashes)
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            out.append('""')
            i += 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4] if text[i + 1:i + 2] != "\\" else text[i:i + 12]):
            m = re.match(r"'(\\[^']*|[^\\'])'", text[i:])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_group(prefix, body):
    """`a::{b, c::{d, e}}` with prefix ['a'] -> [['a','b'], ['a','c','d'], ['a','c','e']]."""
    out, depth, start = [], 0, 0
    parts = []
    for i, ch in enumerate(body):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    for part in parts:
        part = part.strip()
        if not part:
            continue
        m = re.match(r"^([\w:]*?)(?:::)?\{(.*)\}$", part, flags=re.S)
        if m:
            head = [s for s in m.group(1).split("::") if s]
            out.extend(expand_group(prefix + head, m.group(2)))
        else:
            out.append(prefix + [s for s in part.split(" as ")[0].strip().split("::") if s])
    return out


def references(text):
    """Every path that starts with crate::, super:: or self::, groups expanded."""
    paths = []
    for m in re.finditer(r"\b(crate|super|self)((?:::(?:super|\w+))*)::\{", text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        head = [m.group(1)] + [s for s in m.group(2).split("::") if s]
        paths.extend(expand_group(head, text[m.end() : i - 1]))
    for m in re.finditer(r"\b(crate|super|self)((?:::(?:super|\w+))+)", text):
        paths.append([m.group(1)] + [s for s in m.group(2).split("::") if s])
    return paths


def longest_module(path, modules):
    """The longest prefix of `path` that is a module (what a path to an item belongs to)."""
    candidate = tuple(path)
    while candidate and candidate not in modules:
        candidate = candidate[:-1]
    return candidate


def target_of(module, ref, modules):
    """The module a `crate::`, `self::` or `super::` path written in `module` resolves to."""
    head, rest = ref[0], ref[1:]
    if head == "crate":
        base = []
    elif head == "self":
        base = list(module)
    else:
        # `super` in a::b (a::b's file, or its folder's mod.rs) is a; each further one goes up.
        base = list(module[:-1])
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    return longest_module(base + rest, modules)


def sccs(nodes, edges):
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def folder(module):
    return module[0] if module else "main"


def name(module):
    return "::".join(module) or "main"


# Which top-level parts each part may use (docs/architecture.md); `error` is open to all.
ALLOWED = {
    "main": {"cli", "commands", "python"},
    "report": {"analysis", "cli", "commands", "model", "output", "render"},
    "bin": set(),
    "commands": {"cli", "session", "analysis", "render", "output", "capture", "torch", "model"},
    # commands: the running program's socket (commands/answer.rs), which a session that
    # `memprof attach` started serves as `memprof run` does.
    "inprocess": {"cli", "commands", "session", "render", "capture", "python", "torch", "model"},
    "session": {"python", "capture", "analysis", "cli", "torch", "model", "output"},
    "cli": {"analysis", "render", "output", "model"},
    "python": {"capture", "torch", "model"},
    "capture": {"torch", "model"},
    "analysis": {"model"},
    "render": {"model"},
    "output": {"model"},
    "torch": {"model"},
    "model": set(),
}


def main():
    files = {}
    for root in ROOTS:
        for dirpath, _, filenames in os.walk(root):
            for f in filenames:
                if f.endswith(".rs"):
                    p = os.path.join(dirpath, f)
                    module = module_of(p, root)
                    files[module if module or root == ROOTS[0] else ("report",)] = p
    modules = set(files)
    edges = defaultdict(set)
    for module, path in files.items():
        text = strip_comments_and_strings(open(path, encoding="utf-8").read())
        # Unit tests may reach anywhere; they are not part of the import graph.
        text = re.split(r"#\[cfg\(test\)\]\s*mod tests", text)[0]
        for ref in references(text):
            target = target_of(module, ref, modules)
            if target and target != module:
                edges[module].add(target)
    file_circles = sccs(modules, edges)
    folder_edges = defaultdict(set)
    for a, targets in edges.items():
        for b in targets:
            if folder(a) != folder(b) and len(a) > 0:
                folder_edges[folder(a)].add(folder(b))
    folder_circles = sccs({folder(m) for m in modules}, folder_edges)

    print(f"{len(modules)} modules in {len({folder(m) for m in modules})} top-level parts")
    print("\nlayers (top-level part -> parts it uses):")
    for f in sorted(folder_edges):
        print(f"  {f:<14} -> {', '.join(sorted(folder_edges[f]))}")
    if "--edges" in sys.argv:
        print("\nfile-level edges:")
        for a in sorted(edges):
            print(f"  {name(a)} -> {', '.join(name(b) for b in sorted(edges[a]))}")
    print(f"\nimport circles between files: {len(file_circles)}")
    for c in file_circles:
        print("  " + " <-> ".join(name(m) for m in c))
    print(f"import circles between top-level parts: {len(folder_circles)}")
    for c in folder_circles:
        print("  " + " <-> ".join(c))
    against = [
        (a, b)
        for a in sorted(folder_edges)
        for b in sorted(folder_edges[a])
        if b != "error" and b not in ALLOWED.get(a, set())
    ]
    print(f"uses outside the layers of docs/architecture.md: {len(against)}")
    for a, b in against:
        print(f"  {a} -> {b}")
    sizes = sorted(((sum(1 for _ in open(p)), os.path.relpath(p, REPO)) for p in files.values()), reverse=True)
    print("\nlargest files (lines):")
    for n, p in sizes[:8]:
        print(f"  {n:>5} {p}")
    total = sum(n for n, _ in sizes)
    print(f"  total {total} lines of Rust in {len(sizes)} files")
    return 1 if file_circles or folder_circles or against else 0


if __name__ == "__main__":
    sys.exit(main())
