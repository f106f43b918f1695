#!/bin/bash
# Cold-process pipeline/plain compile ratios, as BENCHMARKS.md reports them.
#
#   scripts/ratios.sh [--runs N] [--opt-level none|speed] [--threads T] FILES...
#
# Runs `mergelift size --json` N times per file (each a new process), alternating which side
# compiles first in its process (`--first plain`, then `--first pipeline`, ...; an even N
# balances them, and N = 1 gives the in-process ratio only). The first
# compile of a process runs in memory it has never touched, which costs (up to 15% on a
# module of large functions, on this project's machine); the second reuses what the first
# freed. A user's process compiles its module once, first. So the headline is the *cold*
# ratio: the median pipeline time of the runs where the pipeline went first, over the median
# plain compile of the runs where the plain compile went first. Also printed: the median and
# range of the in-process ratio over all runs (each run's pipeline / plain, either order), the
# plain compile, each phase of the pipeline (of its median first-side run), what was lowered
# and written as native thunks, and code bytes.
#
# A binary without `--first` (older than session 14) always compiles the plain side first:
# then only the in-process ratio is printed (the cold ratio needs both orders).
set -euo pipefail
BIN=${MERGELIFT:-target/release/mergelift}
RUNS=6; OPT=none; THREADS=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) RUNS=$2; shift 2;;
    --opt-level) OPT=$2; shift 2;;
    --threads) THREADS=$2; shift 2;;
    *) break;;
  esac
done
ORDERS=(plain pipeline)
HELP=$("$BIN" size --help)
grep -q -- '--first' <<<"$HELP" || ORDERS=()
for f in "$@"; do
  for k in $(seq "$RUNS"); do
    first=plain; FIRST=()
    if [[ ${#ORDERS[@]} -gt 0 ]]; then
      first=${ORDERS[$(((k - 1) % 2))]}; FIRST=(--first "$first")
    fi
    # (A failing run stops the script with its own error.)
    out=$("$BIN" size --json --opt-level "$OPT" --threads "$THREADS" ${FIRST[@]+"${FIRST[@]}"} "$f")
    echo "$first $out"
  done | python3 -c "
import json, sys, statistics as st
runs = [(l.split(' ', 1)[0], json.loads(l.split(' ', 1)[1])) for l in sys.stdin]
if not runs:
    sys.exit(1)  # the failing run has said why
rs = [d for _, d in runs]
ratios = sorted(d['ratio'] for d in rs)
mid = st.median(ratios)
plain_first = [d for o, d in runs if o == 'plain']
pipe_first = [d for o, d in runs if o == 'pipeline']
name = sys.argv[1].split('/')[-1]
if pipe_first and plain_first:
    plain = st.median(d['time_ms']['compile_before'] for d in plain_first)
    pipe = st.median(d['pipeline_ms'] for d in pipe_first)
    cold = 'cold %.3f' % (pipe / plain)
    d = sorted(pipe_first, key=lambda d: d['pipeline_ms'])[len(pipe_first) // 2]
else:
    plain = st.median(d['time_ms']['compile_before'] for d in rs)
    cold = 'cold   -  '
    d = sorted(rs, key=lambda d: d['ratio'])[len(rs) // 2]
t = d['time_ms']
print('%-20s %6d fns  %s  in-process %.3f (%.3f..%.3f)  plain %6.0f ms | lift %5.1f merge %5.1f similar %5.1f lower %5.1f compile %6.0f | lowered %4d native thunks %4d | bytes %d -> %d (%+.1f%%)' % (
    name, d['functions_in'], cold, mid, ratios[0], ratios[-1], plain,
    t['lift'], t.get('merge', 0), t.get('merge-similar', 0), t['lower'], t['compile_after'],
    d['lowered'], d.get('native_thunks', 0), d['code_bytes_before'], d['code_bytes_after'],
    100 * (d['code_bytes_after'] / d['code_bytes_before'] - 1)))
" "$f"
done
