#!/usr/bin/env python3
"""The shape of the source tree: largest files, longest functions, public items per crate.

    scripts/house.py [--files N] [--functions N] [--over LINES]

Counts lines as `wc -l` does. A function runs from its `fn` line to its closing brace (found by
brace depth, skipping strings, chars and comments). Test modules (`#[cfg(test)] mod`) and the
`tests/`, `benches/`, `examples/` folders are left out of the function list. Public items are
declarations starting with `pub ` (not `pub(crate)` or `pub(super)`), per crate `src/`.
"""

import argparse
import os
import re
import sys

CRATES = ["midend", "jit-driver", "tools", "cli", "."]
FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)")
PUB = re.compile(r"^\s*pub\s+(unsafe\s+)?(fn|struct|enum|const|static|trait|type|mod|use|union)\b")


def rust_files(root):
    for crate in CRATES:
        src = os.path.join(root, crate, "src")
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames.sort()
            for f in sorted(filenames):
                if f.endswith(".rs"):
                    yield crate, os.path.relpath(os.path.join(dirpath, f), root)


def strip(line, state):
    """The line with strings, chars and comments blanked; `state` carries block comments."""
    out = []
    i = 0
    n = len(line)
    while i < n:
        if state["block"]:
            j = line.find("*/", i)
            if j < 0:
                return "".join(out)
            state["block"] = False
            i = j + 2
            continue
        c = line[i]
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            state["block"] = True
            i += 2
            continue
        if c == '"':
            i += 1
            while i < n and line[i] != '"':
                i += 2 if line[i] == "\\" else 1
            i += 1
            continue
        if c == "'":
            m = re.match(r"'(\\.|[^\\'])'", line[i:])
            if m:
                i += len(m.group(0))
                continue
        out.append(c)
        i += 1
    return "".join(out)


def functions(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    state = {"block": False}
    code = [strip(l, state) for l in lines]
    result = []
    skip_until = -1
    for i, line in enumerate(code):
        if i <= skip_until:
            continue
        if re.match(r"^\s*#\[cfg\(test\)\]", lines[i]):
            # Skip the test module or item that follows.
            end = block_end(code, i + 1)
            skip_until = end
            continue
        m = FN.match(line)
        if not m:
            continue
        end = block_end(code, i)
        if end is None:
            continue
        result.append((end - i + 1, m.group(6), i + 1))
    return result


def block_end(code, start):
    depth = 0
    opened = False
    for j in range(start, len(code)):
        for c in code[j]:
            if c == "{":
                depth += 1
                opened = True
            elif c == "}":
                depth -= 1
                if opened and depth == 0:
                    return j
            elif c == ";" and not opened and depth == 0:
                return None
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=12)
    ap.add_argument("--functions", type=int, default=12)
    ap.add_argument("--over", type=int, default=150, help="also count functions over this many lines")
    ap.add_argument("--root", default=".")
    args = ap.parse_args()

    files = []
    fns = []
    pubs = {}
    for crate, path in rust_files(args.root):
        full = os.path.join(args.root, path)
        with open(full, encoding="utf-8") as f:
            text = f.read()
        files.append((text.count("\n"), path))
        pubs[crate] = pubs.get(crate, 0) + sum(1 for l in text.split("\n") if PUB.match(l))
        for length, name, line in functions(full):
            fns.append((length, f"{path}:{line} {name}"))

    files.sort(reverse=True)
    fns.sort(reverse=True)
    print("| file | lines |\n|---|---:|")
    for n, p in files[: args.files]:
        print(f"| `{p}` | {n:,} |")
    print("\n| function | lines |\n|---|---:|")
    for n, p in fns[: args.functions]:
        print(f"| `{p}` | {n} |")
    print(f"\nfunctions over {args.over} lines: {sum(1 for n, _ in fns if n > args.over)}")
    print("\n| crate | public items |\n|---|---:|")
    for crate in CRATES:
        print(f"| {'facade' if crate == '.' else crate} | {pubs.get(crate, 0)} |")


if __name__ == "__main__":
    sys.exit(main())
