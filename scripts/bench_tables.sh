#!/bin/bash
# The tables of BENCHMARKS.md, as markdown, from the release `mergelift`:
#
#   scripts/bench_tables.sh bytes [CORPUS_DIR]   # code bytes per wasm corpus module
#   scripts/bench_tables.sh shapes [N...]        # merging by call-graph shape (default 10000 100000)
#   scripts/bench_tables.sh ratios [FILE...]     # pipeline/plain instructions at opt levels none
#                                                # and speed (scripts/iratios.sh; needs valgrind;
#                                                # default rust-json and gcc-loops)
#   scripts/bench_tables.sh merged-calls         # run-time cost of merged calls, from the last
#                                                # `cargo bench --bench merged_calls`
#
# Build first: `cargo build --release -p mergelift-cli`. Each row is one cold process.
set -euo pipefail
BIN=${MERGELIFT:-target/release/mergelift}
[[ ${1:-} == merged-calls || -x $BIN ]] || { echo "$BIN: not built (cargo build --release -p mergelift-cli)" >&2; exit 2; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
case ${1:-} in
  bytes)
    dir=${2:-../shared/corpus/wasm}
    echo "| module | plain | merge | merge,merge-similar | saved | all local, fetchable | all local, \`--no-fetch-locals\` |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    for f in "$dir"/*.clif; do
      plain=$("$BIN" size --json --passes merge "$f" | json 'd["code_bytes_before"]')
      m=$("$BIN" size --json --passes merge "$f" | json 'd["code_bytes_after"]')
      ms=$("$BIN" size --json "$f" | json 'd["code_bytes_after"]')
      lf=$("$BIN" size --json --local "$f" | json 'd["code_bytes_after"]')
      ln=$("$BIN" size --json --local --no-fetch-locals "$f" | json 'd["code_bytes_after"]')
      saved=$(python3 -c "print(f'{100*($plain-$ms)/$plain:.1f}%')")
      echo "| $(basename "$f" .clif) | $plain | $m | $ms | $saved | $lf | $ln |"
    done
    ;;
  ratios)
    shift
    files=${*:-../shared/corpus/wasm/rust-json.clif ../shared/corpus/wasm/gcc-loops.clif}
    echo "| module | opt level | ratio | own | compile |"
    echo "|---|---|---:|---:|---:|"
    for o in none speed; do
      # shellcheck disable=SC2086
      MERGELIFT=$BIN "$(dirname "$0")/iratios.sh" --opt-level "$o" $files | tail -n +2 |
        awk -v o="$o" '{ sub(/\.clif$/, "", $1); printf "| %s | %s | %s | %s | %s |\n", $1, o, $4, $6, $7 }'
    done
    ;;
  merged-calls)
    dir=target/criterion/merged_calls
    [[ -d $dir ]] || { echo "$dir: run \`cargo bench --bench merged_calls\` first" >&2; exit 2; }
    ns() { json "f'{d[\"median\"][\"point_estimate\"]:.1f} ns'" < "$dir/${1}_$2/new/estimates.json"; }
    echo "| case | without the pass | \`merge,merge-similar\` |"
    echo "|---|---:|---:|"
    for c in thunk rewritten indirect; do
      echo "| $c | $(ns "$c" none) | $(ns "$c" similar) |"
    done
    ;;
  shapes)
    shift
    sizes=${*:-10000 100000}
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    echo "| shape | functions | merged | \`merge\` ms | \`merge-similar\` ms | µs per function |"
    echo "|---|---:|---:|---:|---:|---:|"
    for s in chain chain-const ring star tree fan-in fan-out; do
      for n in $sizes; do
        "$BIN" gen --shape "$s" --functions "$n" > "$tmp/m.clif" 2>/dev/null
        "$BIN" opt --passes merge,merge-similar --emit none --stats "$tmp/m.clif" 2>&1 >/dev/null | tail -1 |
          json "f'| $s | $n | {d[\"merged\"]} | {d[\"time_ms\"][\"merge\"]:.1f} | {d[\"time_ms\"][\"merge-similar\"]:.1f} | {1e3*(d[\"time_ms\"][\"merge\"]+d[\"time_ms\"][\"merge-similar\"])/$n:.2f} |'"
      done
    done
    ;;
  *) echo "usage: $0 bytes [CORPUS_DIR] | shapes [N...] | ratios [FILE...] | merged-calls" >&2; exit 2;;
esac
