#!/bin/bash
# BENCHMARKS.md's "JIT patterns": plain cranelift-jit against `MergeModule`, per function.
#
#   scripts/jit_patterns.sh [--runs N] [--no-callgrind] [--only REGEX]
#
# Each row runs `tools/examples/jit_patterns.rs` as cold processes, plain and merged in turn,
# N times each (default 5), and takes the median of the µs per function each prints (the
# timed part: declare, define and finalize; the REPL rows time 3,000 steps after 500 warm-up
# functions). Beside it, the instructions per function that callgrind counts in the timed
# part (the REPL rows over 300 steps, `repl-near` over 3,000: its first 500 steps each start
# a family, the others join one; the batch rows over the whole batch), on one thread:
# a row with default threads shows the wall time only; and the code bytes each side compiled
# over all functions (the REPL rows: warm-up included). `--only` keeps the rows whose
# configuration matches REGEX (e.g. `--only repl`).
set -euo pipefail
RUNS=5
CALLGRIND=1
ONLY=.
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) RUNS=$2; shift 2;;
    --no-callgrind) CALLGRIND=0; shift;;
    --only) ONLY=$2; shift 2;;
    *) echo "usage: $0 [--runs N] [--no-callgrind] [--only REGEX]" >&2; exit 2;;
  esac
done
cargo build -q --release -p mergelift-tools --example jit_patterns
BIN=target/release/examples/jit_patterns
if [[ $CALLGRIND == 1 ]] && ! command -v valgrind >/dev/null; then
  echo "jit_patterns.sh: valgrind is needed for the instruction counts (or --no-callgrind)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The median µs per function of `$BIN ARGS`, over the runs in $tmp/$1.
median() { sort -g "$tmp/$1" | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# Instructions per function in the timed part of one run of `$BIN ARGS`.
instructions() {
  local n
  valgrind --tool=callgrind --toggle-collect='*jit_patterns::measured*' \
    --callgrind-out-file="$tmp/cg" "$BIN" "$@" >"$tmp/cg.out" 2>/dev/null
  n=$(sed -n 's/.*, \([0-9]*\) functions timed/\1/p' "$tmp/cg.out")
  callgrind_annotate "$tmp/cg" 2>/dev/null | awk -v n="$n" '/PROGRAM TOTALS/ {gsub(",", "", $1); printf "%.1fk", $1 / n / 1000; exit}'
  rm -f "$tmp"/cg*
}

echo "| pattern | threads | verifier | opt level | plain µs | MergeModule µs | wall ratio | plain instructions | MergeModule instructions | ratio | plain code bytes | MergeModule code bytes |"
echo "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
while read -r label wall cg threads verifier opt; do
  [[ -z $label ]] && continue
  cfg="$label threads=$threads verifier=$verifier opt=$opt"
  [[ $cfg =~ $ONLY ]] || continue
  flags=(--threads "$threads" --verifier "$verifier" --opt "$opt")
  read -r -a wall_args <<<"${wall//,/ }"
  : >"$tmp/plain"; : >"$tmp/merge"
  for _ in $(seq "$RUNS"); do
    "$BIN" "${wall_args[@]}" "${flags[@]}" --plain >"$tmp/out"
    sed -n 's/.*: \([0-9.]*\) us per function.*/\1/p' "$tmp/out" >>"$tmp/plain"
    bp=$(sed -n 's/.*, \([0-9]*\) code bytes/\1/p' "$tmp/out")
    "$BIN" "${wall_args[@]}" "${flags[@]}" >"$tmp/out"
    sed -n 's/.*: \([0-9.]*\) us per function.*/\1/p' "$tmp/out" >>"$tmp/merge"
    bm=$(sed -n 's/.*, \([0-9]*\) code bytes/\1/p' "$tmp/out")
  done
  p=$(median plain); m=$(median merge)
  ip=—; im=—; ir=—
  if [[ $CALLGRIND == 1 && $threads == 1 ]]; then
    read -r -a cg_args <<<"${cg//,/ }"
    ip=$(instructions "${cg_args[@]}" "${flags[@]}" --plain)
    im=$(instructions "${cg_args[@]}" "${flags[@]}")
    ir=$(python3 -c "print('%.3f' % (float('${im%k}') / float('${ip%k}')))")
  fi
  printf '| `%s` | %s | %s | %s | %s | %s | %.3f | %s | %s | %s | %s | %s |\n' "${wall//,/ }" "$threads" "$verifier" "$opt" \
    "$p" "$m" "$(python3 -c "print($m / $p)")" "$ip" "$im" "$ir" "$bp" "$bm"
done <<'ROWS'
repl-unique repl-unique,3000 repl-unique,300 1 off none
repl-unique repl-unique,3000 repl-unique,300 1 on none
repl-unique repl-unique,3000 repl-unique,300 1 off speed
repl-unique repl-unique,3000 repl-unique,300 1 on speed
repl-equal repl-equal,3000 repl-equal,300 1 off none
repl-equal repl-equal,3000 repl-equal,300 1 on none
repl-equal repl-equal,3000 repl-equal,300 1 off speed
repl-equal repl-equal,3000 repl-equal,300 1 on speed
repl-near repl-near,3000 repl-near,3000 1 off none
repl-near repl-near,3000 repl-near,3000 1 on none
repl-near-one-batch repl-near,3000,--every,3500 repl-near,300,--every,800 1 off none
batch-1000 batch,1000,1000 batch,1000,1000 1 off none
batch-1000 batch,1000,1000 batch,1000,1000 1 on none
batch-1000 batch,1000,1000 batch,1000,1000 1 off speed
batch-1000 batch,1000,1000 batch,1000,1000 default off none
batch-10000 batch,10000,1000 batch,10000,1000 1 off none
batch-10000 batch,10000,1000 batch,10000,1000 1 on none
batch-10000 batch,10000,1000 batch,10000,1000 1 off speed
batch-10000 batch,10000,1000 batch,10000,1000 1 on speed
batch-10000 batch,10000,1000 batch,10000,1000 default off none
batch-10000 batch,10000,1000 batch,10000,1000 default on none
batch-10000 batch,10000,1000 batch,10000,1000 default off speed
batch-dup-10000 batch-dup,10000,1000 batch-dup,10000,1000 1 off none
batch-dup-10000 batch-dup,10000,1000 batch-dup,10000,1000 1 on none
batch-dup-10000 batch-dup,10000,1000 batch-dup,10000,1000 default off none
ROWS
