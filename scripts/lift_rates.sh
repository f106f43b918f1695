#!/bin/bash
# Lift throughput per module, warm and cold, as BENCHMARKS.md reports it for issue 16.
#
#   scripts/lift_rates.sh [--runs N] FILES...
#
# For each `.clif` file, in CLIF instructions per second:
# - warm: `tools/examples/lift_speed.rs` (the fastest of 30 lifts of the whole module in one process,
#   its functions parsed beforehand; each lifted module is dropped before the next lift);
# - cold: the median over N new processes of `mergelift opt --passes none --no-verify
#   --emit none --stats`'s `time_ms.lift` (the CLI parses, verifies and lifts one function
#   at a time, so its lift writes into a new process's memory), with the range.
#
# Build first: `cargo build --release -p mergelift-tools --example lift_speed`.
# This machine's speed drifts by 10-30% from hour to hour: compare builds in alternation
# (MERGELIFT and LIFT_SPEED name the binaries), never against a figure from another hour.
set -euo pipefail
BIN=${MERGELIFT:-target/release/mergelift}
LS=${LIFT_SPEED:-target/release/examples/lift_speed}
RUNS=7
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) RUNS=$2; shift 2;;
    -h|--help) sed -n '2,15p' "$0"; exit 0;;
    *) break;;
  esac
done
if [[ $# -eq 0 ]]; then
  echo "usage: $0 [--runs N] FILES..." >&2
  exit 2
fi
for b in "$BIN" "$LS"; do
  [[ -x $b ]] || { echo "$b: not built (cargo build --release -p mergelift-tools --example lift_speed)" >&2; exit 2; }
done
for f in "$@"; do
  [[ -r $f ]] || { echo "$f: cannot read" >&2; exit 2; }
done
printf '%-22s %9s %16s %28s\n' module insts "warm M/s (ms)" "cold M/s (median ms, range)"
for f in "$@"; do
  # "FILE: N insts, best B ms (R M/s), mean M ms"
  w=$("$LS" 30 "$f")
  n=$(awk '{print $2}' <<<"$w")
  wb=$(awk '{print $5}' <<<"$w")
  cold=()
  for _ in $(seq "$RUNS"); do
    cold+=("$("$BIN" opt --passes none --no-verify --emit none --stats "$f" 2>&1 >/dev/null | tail -1 |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["time_ms"]["lift"])')")
  done
  python3 - "$f" "$n" "$wb" "${cold[@]}" <<'EOF'
import os, statistics, sys
f, n, wb, cold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sorted(map(float, sys.argv[4:]))
m = statistics.median(cold)
print(f"{os.path.basename(f):22s} {n:9d} {n / wb / 1e3:7.1f} ({wb:6.2f}) "
      f"{n / m / 1e3:9.1f} ({m:6.2f}, {cold[0]:.2f}-{cold[-1]:.2f})")
EOF
done
