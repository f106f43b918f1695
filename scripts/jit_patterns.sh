#!/bin/bash
# BENCHMARKS.md's "JIT patterns": plain cranelift-jit against `MergeModule`, per function.
#
#   scripts/jit_patterns.sh [--runs N] [--no-callgrind] [--only REGEX] [--cache-sim]
#                           [--incremental-cache] [--rss N]
#
# Each row runs `tools/examples/jit_patterns.rs` as cold processes, plain and merged in turn
# (plain, merged, plain, merged, ...), N times each (default 7), and takes the median of the
# µs per function each prints for the timed part (declare, define and finalize; the REPL rows
# time 3,000 steps after 500 warm-up functions): its wall time, and this thread's CPU time
# (`CLOCK_THREAD_CPUTIME_ID`: what the compiling thread spent, without the time other
# processes took the core from it; on one thread the figure to compare). Beside them, the
# instructions per function that callgrind counts in the timed part (the REPL rows over 300
# steps, `repl-near` over 3,000: its first 500 steps each start a family, the others join
# one; the batch rows over the whole batch), on one thread: a row with default threads shows
# the wall time only; and the code bytes each side compiled over all functions (the REPL rows:
# warm-up included). `--only` keeps the rows whose configuration matches REGEX (e.g. `--only
# 'repl.*verifier=off'`).
#
# The `--every 3500` row flushes the warm-up within its timed part, so it is there for its
# code bytes: no instruction counts, and not in the tables below.
#
# After the main table, for the REPL rows on one thread that `--only` keeps:
#   --cache-sim          callgrind's cache simulation (`--cache-sim=yes`, the caches valgrind
#                        reads from this CPU) over the same timed part: I1 misses (I1mr), D1
#                        misses (D1mr+D1mw) and last-level misses (ILmr+DLmr+DLmw) per
#                        function, plain against merged.
#   --incremental-cache  Cranelift's incremental cache as a peer (the example built with the
#                        `incremental-cache` feature): plain cranelift-jit, each function
#                        compiled by `compile_with_cache` on an in-memory store, empty at the
#                        start (miss: a REPL whose inputs are new to the cache; repl-equal's
#                        steps still hit what the warm-up stored) or holding every function
#                        (hit); plain, miss and hit in turn from that build, N times each, CPU
#                        µs and instructions. Under callgrind the cache key's SHA-256 runs in
#                        software (valgrind hides the CPU's SHA extensions from the program), at
#                        about 9x its native cost: its instructions overstate it.
#   --rss N              the peak RSS (`VmHWM`) of one `repl-unique N` process per side
#                        (verifier off, opt level none, one thread; the cache's miss side too
#                        with --incremental-cache), and the RSS before the first define (the
#                        N functions, built up front).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=7
CALLGRIND=1
ONLY=.
CACHE_SIM=0
INCREMENTAL=0
RSS=0
usage() {
  echo "usage: $0 [--runs N] [--no-callgrind] [--only REGEX] [--cache-sim] [--incremental-cache] [--rss N]" >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) RUNS=$2; shift 2;;
    --no-callgrind) CALLGRIND=0; shift;;
    --only) ONLY=$2; shift 2;;
    --cache-sim) CACHE_SIM=1; shift;;
    --incremental-cache) INCREMENTAL=1; shift;;
    --rss) RSS=$2; shift 2;;
    *) usage;;
  esac
done
if [[ ($CALLGRIND == 1 || $CACHE_SIM == 1) ]] && ! command -v valgrind >/dev/null; then
  echo "jit_patterns.sh: valgrind is needed for the instruction counts and --cache-sim (or --no-callgrind)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The two builds write the same path: each is copied out.
OUT=${CARGO_TARGET_DIR:-target}/release/examples/jit_patterns
cargo build -q --release -p mergelift-tools --example jit_patterns
BIN=$tmp/jit_patterns
cp "$OUT" "$BIN"
if [[ $INCREMENTAL == 1 ]]; then
  cargo build -q --release -p mergelift-tools --example jit_patterns --features incremental-cache
  CACHE_BIN=$tmp/jit_patterns_cache
  cp "$OUT" "$CACHE_BIN"
fi

# The median of the numbers in $tmp/$1.
median() { sort -g "$tmp/$1" | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { python3 -c "print('%.3f' % (float('${1%k}') / float('${2%k}')))"; }
# One run of `BIN ARGS`: its wall µs per function appended to $tmp/$1.wall, its CPU µs to
# $tmp/$1.cpu; its output left in $tmp/out.
timed() {
  local side=$1
  shift
  "$@" >"$tmp/out"
  sed -n 's/.*: \([0-9.]*\) us per function.*/\1/p' "$tmp/out" >>"$tmp/$side.wall"
  sed -n 's/.*(\([0-9.]*\) us on the CPU).*/\1/p' "$tmp/out" >>"$tmp/$side.cpu"
}
# Callgrind over the timed part of one run of `BIN ARGS`, with the extra valgrind options in
# $CG_OPTS; prints the events' totals divided by the functions timed, as `NAME=VALUE` words.
callgrind() {
  local n
  # shellcheck disable=SC2086
  valgrind --tool=callgrind $CG_OPTS --toggle-collect='*jit_patterns::measured*' \
    --callgrind-out-file="$tmp/cg" "$@" >"$tmp/cg.out" 2>/dev/null
  n=$(sed -n 's/.*, \([0-9]*\) functions timed.*/\1/p' "$tmp/cg.out")
  awk -v n="$n" '/^events:/ {for (i = 2; i <= NF; i++) ev[i] = $i}
    /^(summary|totals):/ {for (i = 2; i <= NF; i++) printf "%s=%.1f ", ev[i], $i / n; exit}' "$tmp/cg"
  rm -f "$tmp"/cg*
}
# Instructions per function in the timed part of one run of `BIN ARGS`, in thousands.
instructions() {
  CG_OPTS= callgrind "$@" | tr ' ' '\n' | awk -F= '$1 == "Ir" {printf "%.1fk", $2 / 1000}'
}
# I1, D1 and last-level misses per function in the timed part of one run: three words.
misses() {
  CG_OPTS=--cache-sim=yes callgrind "$@" | tr ' ' '\n' | awk -F= '$2 != "" {e[$1] = $2}
    END {printf "%.1f %.1f %.1f", e["I1mr"], e["D1mr"] + e["D1mw"], e["ILmr"] + e["DLmr"] + e["DLmw"]}'
}

# The REPL rows the later tables take: `wall args|callgrind args|flags|label|merged CPU µs`.
: >"$tmp/repl"
echo "| pattern | threads | verifier | opt level | plain µs | MergeModule µs | wall ratio | plain CPU µs | MergeModule CPU µs | CPU ratio | plain instructions | MergeModule instructions | ratio | plain code bytes | MergeModule code bytes |"
echo "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
while read -r label wall cg threads verifier opt; do
  [[ -z $label ]] && continue
  cfg="$label threads=$threads verifier=$verifier opt=$opt"
  [[ $cfg =~ $ONLY ]] || continue
  flags=(--threads "$threads" --verifier "$verifier" --opt "$opt")
  read -r -a wall_args <<<"${wall//,/ }"
  rm -f "$tmp"/plain.* "$tmp"/merge.*
  for _ in $(seq "$RUNS"); do
    timed plain "$BIN" "${wall_args[@]}" "${flags[@]}" --plain
    bp=$(sed -n 's/.*, \([0-9]*\) code bytes/\1/p' "$tmp/out")
    timed merge "$BIN" "${wall_args[@]}" "${flags[@]}"
    bm=$(sed -n 's/.*, \([0-9]*\) code bytes/\1/p' "$tmp/out")
  done
  p=$(median plain.wall); m=$(median merge.wall)
  pc=$(median plain.cpu); mc=$(median merge.cpu)
  ip=—; im=—; ir=—
  # (A row with `--every` flushes the warm-up in its timed part: for its code bytes, without
  # per-function counts, and not in the tables after.)
  if [[ $CALLGRIND == 1 && $threads == 1 && $cg != *--every* ]]; then
    read -r -a cg_args <<<"${cg//,/ }"
    ip=$(instructions "$BIN" "${cg_args[@]}" "${flags[@]}" --plain)
    im=$(instructions "$BIN" "${cg_args[@]}" "${flags[@]}")
    ir=$(ratio "$im" "$ip")
  fi
  printf '| `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "${wall//,/ }" "$threads" "$verifier" "$opt" \
    "$p" "$m" "$(ratio "$m" "$p")" "$pc" "$mc" "$(ratio "$mc" "$pc")" "$ip" "$im" "$ir" "$bp" "$bm"
  if [[ $label == repl* && $threads == 1 && $cg != *--every* ]]; then
    echo "$wall|$cg|${flags[*]}|${wall//,/ }|$mc" >>"$tmp/repl"
  fi
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

if [[ $CACHE_SIM == 1 && -s $tmp/repl ]]; then
  echo
  echo "Cache simulation (callgrind \`--cache-sim=yes\`), misses per function in the timed part:"
  echo
  echo "| pattern | verifier | opt level | plain I1 | MergeModule I1 | ratio | plain D1 | MergeModule D1 | ratio | plain LL | MergeModule LL | ratio |"
  echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  while IFS='|' read -r _ cg flags label _; do
    read -r -a cg_args <<<"${cg//,/ }"
    read -r -a f <<<"$flags"
    read -r p1 pd pl <<<"$(misses "$BIN" "${cg_args[@]}" "${f[@]}" --plain)"
    read -r m1 md ml <<<"$(misses "$BIN" "${cg_args[@]}" "${f[@]}")"
    printf '| `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "${f[3]}" "${f[5]}" \
      "$p1" "$m1" "$(ratio "$m1" "$p1")" "$pd" "$md" "$(ratio "$md" "$pd")" "$pl" "$ml" "$(ratio "$ml" "$pl")"
  done <"$tmp/repl"
fi

if [[ $INCREMENTAL == 1 && -s $tmp/repl ]]; then
  echo
  echo "Cranelift's incremental cache (plain cranelift-jit, \`compile_with_cache\`, in-memory store), per function:"
  echo
  echo "| pattern | verifier | opt level | plain CPU µs | cache miss CPU µs | cache hit CPU µs | MergeModule CPU µs | miss/plain | hit/plain | plain instructions | cache miss instructions | cache hit instructions |"
  echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  while IFS='|' read -r wall cg flags label mc; do
    read -r -a wall_args <<<"${wall//,/ }"
    read -r -a cg_args <<<"${cg//,/ }"
    read -r -a f <<<"$flags"
    rm -f "$tmp"/plain.* "$tmp"/miss.* "$tmp"/hit.*
    for _ in $(seq "$RUNS"); do
      timed plain "$CACHE_BIN" "${wall_args[@]}" "${f[@]}" --plain
      timed miss "$CACHE_BIN" "${wall_args[@]}" "${f[@]}" --incremental-cache miss
      timed hit "$CACHE_BIN" "${wall_args[@]}" "${f[@]}" --incremental-cache hit
    done
    pc=$(median plain.cpu); xc=$(median miss.cpu); hc=$(median hit.cpu)
    ip=—; ix=—; ih=—
    if [[ $CALLGRIND == 1 ]]; then
      ip=$(instructions "$CACHE_BIN" "${cg_args[@]}" "${f[@]}" --plain)
      ix=$(instructions "$CACHE_BIN" "${cg_args[@]}" "${f[@]}" --incremental-cache miss)
      ih=$(instructions "$CACHE_BIN" "${cg_args[@]}" "${f[@]}" --incremental-cache hit)
    fi
    printf '| `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "${f[3]}" "${f[5]}" \
      "$pc" "$xc" "$hc" "$mc" "$(ratio "$xc" "$pc")" "$(ratio "$hc" "$pc")" "$ip" "$ix" "$ih"
  done <"$tmp/repl"
fi

if [[ $RSS -gt 0 ]]; then
  echo
  echo "Peak RSS of one \`repl-unique $RSS\` process (verifier off, opt level none, one thread):"
  echo
  echo "| side | peak RSS kB | ratio to plain | RSS before the first define kB | CPU µs per function |"
  echo "|---|---:|---:|---:|---:|"
  sides=(plain merge)
  [[ $INCREMENTAL == 1 ]] && sides+=(cache-miss)
  for side in "${sides[@]}"; do
    case $side in
      plain) bin=$BIN; extra=(--plain);;
      merge) bin=$BIN; extra=();;
      cache-miss) bin=$CACHE_BIN; extra=(--incremental-cache miss);;
    esac
    "$bin" repl-unique "$RSS" --verifier off --opt none --threads 1 "${extra[@]}" >"$tmp/out"
    kb=$(sed -n 's/^peak RSS \([0-9]*\) kB.*/\1/p' "$tmp/out")
    before=$(sed -n 's/^peak RSS .*(\([0-9]*\) kB before.*/\1/p' "$tmp/out")
    cpu=$(sed -n 's/.*(\([0-9.]*\) us on the CPU).*/\1/p' "$tmp/out")
    [[ $side == plain ]] && plain_kb=$kb
    printf '| %s | %s | %s | %s | %s |\n' "$side" "$kb" "$(ratio "$kb" "$plain_kb")" "$before" "$cpu"
  done
fi
