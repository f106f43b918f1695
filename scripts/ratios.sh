#!/bin/bash
# Cold-process pipeline/plain compile ratios, as BENCHMARKS.md reports them.
#
#   scripts/ratios.sh [--runs N] [--opt-level none|speed] [--threads T] FILES...
#
# Runs `mergelift size --json` N times per file (each a new process), and prints the run with
# the median ratio: functions, ratio (min..max over the runs), the plain compile, each phase of
# the pipeline, what was lowered and written as native thunks, and code bytes.
#
# The runs alternate which side compiles first in its process (`--first plain`, then
# `--first pipeline`, ...): the first side runs in a heap the process has not used yet, the
# second reuses what the first freed, so neither side always gets the warmer heap. A binary
# without `--first` (older than session 14) runs every time with the plain compile first.
set -euo pipefail
BIN=${MERGELIFT:-target/release/mergelift}
RUNS=5; OPT=none; THREADS=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) RUNS=$2; shift 2;;
    --opt-level) OPT=$2; shift 2;;
    --threads) THREADS=$2; shift 2;;
    *) break;;
  esac
done
ORDERS=(plain pipeline)
"$BIN" size --help | grep -q -- '--first' || ORDERS=()
for f in "$@"; do
  for k in $(seq "$RUNS"); do
    FIRST=()
    [[ ${#ORDERS[@]} -gt 0 ]] && FIRST=(--first "${ORDERS[$((k % 2))]}")
    "$BIN" size --json --opt-level "$OPT" --threads "$THREADS" "${FIRST[@]}" "$f"
  done | python3 -c "
import json, sys
rs = [json.loads(l) for l in sys.stdin]
d = sorted(rs, key=lambda d: d['ratio'])[len(rs) // 2]
t = d['time_ms']
print('%-20s %6d fns  ratio %.3f (%.3f..%.3f)  plain %6.0f ms | lift %5.1f merge %5.1f similar %5.1f lower %5.1f compile %6.0f | lowered %4d native thunks %4d | bytes %d -> %d (%+.1f%%)' % (
    sys.argv[1].split('/')[-1], d['functions_in'], d['ratio'],
    min(r['ratio'] for r in rs), max(r['ratio'] for r in rs), t['compile_before'],
    t['lift'], t.get('merge', 0), t.get('merge-similar', 0), t['lower'], t['compile_after'],
    d['lowered'], d.get('native_thunks', 0), d['code_bytes_before'], d['code_bytes_after'],
    100 * (d['code_bytes_after'] / d['code_bytes_before'] - 1)))
" "$f"
done
