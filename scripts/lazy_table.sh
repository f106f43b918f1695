#!/bin/bash
# BENCHMARKS.md's "Lazy JITs" table: code bytes saved when a module is compiled as a lazy JIT
# compiles it (`mergelift size --batch N`: a flush every N functions, in input order) against
# one flush, beside the order-limited ceiling (`--ceiling`: the most merging could save when
# each function merges only with functions of its own batch or an earlier one).
#
#   scripts/lazy_table.sh [FILES...]    (default: the wasm corpus, ../shared/corpus/wasm/*.clif)
#
# Each cell: saved bytes in % of plain; "kept": the share of one flush's saving; "of ceiling":
# the share of the ceiling's.
set -euo pipefail
cargo build -q --release -p mergelift-cli
BIN=${BIN:-target/release/mergelift}

files=("$@")
[[ ${#files[@]} -eq 0 ]] && files=(../shared/corpus/wasm/*.clif)
for f in "${files[@]}"; do
  line=$(basename "$f" .clif)
  for b in 100 10 1; do
    line+=" $("$BIN" size --json --batch "$b" --ceiling "$f" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["code_bytes_before"], d["code_bytes_before"] - d["code_bytes_after"], d["one_flush_saved"], d["order_limited_saved"])')"
  done
  echo "$line"
done | python3 -c '
import sys
rows, total = [], [0] * 12
for l in sys.stdin:
    p = l.split(); v = list(map(int, p[1:]))
    rows.append((p[0], v)); total = [a + b for a, b in zip(total, v)]
rows.append(("**total**", total))
print("| module | one flush | batch 100 | kept | of ceiling | batch 10 | kept | of ceiling | batch 1 | kept | of ceiling |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
pct = lambda a, b: f"{100 * a / b:.1f}%" if b else "—"
for name, v in rows:
    cells = [name, f"{100 * v[2] / v[0]:.2f}%"]
    for i in range(3):
        before, saved, one, ceil = v[4 * i:4 * i + 4]
        cells += [f"{100 * saved / before:.2f}% (ceiling {100 * ceil / before:.2f}%)", pct(saved, one), pct(saved, ceil)]
    print("| " + " | ".join(cells) + " |")
'
