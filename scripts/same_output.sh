#!/bin/bash
# Is the one-flush output of two builds of `mergelift` the same? For each file: `opt --emit
# clif`, `opt --emit lir` byte for byte, and `size --json`'s code bytes and merge counts.
#
#   scripts/same_output.sh OLD_BIN NEW_BIN [FILES...]   (default: the wasm corpus)
#
# Prints each difference and `fail=N` (the number of files that differ); exits 1 when any does.
set -uo pipefail
old=$1 new=$2; shift 2
files=("$@")
[[ ${#files[@]} -eq 0 ]] && files=(../shared/corpus/wasm/*.clif)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
summary() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["code_bytes_after"], d["merged"], d["thunked"], d["aliased"], d["folded"])'; }
for f in "${files[@]}"; do
  bad=0
  for e in clif lir; do
    "$old" opt --emit "$e" "$f" >"$tmp/old" 2>/dev/null
    "$new" opt --emit "$e" "$f" >"$tmp/new" 2>/dev/null
    cmp -s "$tmp/old" "$tmp/new" || { echo "differs: opt --emit $e $f"; bad=1; }
  done
  a=$("$old" size --threads 1 --json "$f" | summary)
  b=$("$new" size --threads 1 --json "$f" | summary)
  [[ $a == "$b" ]] || { echo "differs: size $f: $a against $b"; bad=1; }
  fail=$((fail + bad))
done
echo "fail=$fail"
[[ $fail -eq 0 ]]
