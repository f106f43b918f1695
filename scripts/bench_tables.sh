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
#   scripts/bench_tables.sh aligned [CORPUS_DIR] # merge-aligned: code bytes at both opt levels
#                                                # and the kinds of its merges, per module
#   scripts/bench_tables.sh aligned-local [CORPUS_DIR] # the same bytes with every function local
#                                                # and never fetched (`size --local
#                                                # --no-fetch-locals`): members folded away
#   scripts/bench_tables.sh aligned-cost [N...]  # merge-aligned's time per function on generated
#                                                # modules with --edit-ratio 0.2 (default 10000
#                                                # 100000)
#   scripts/bench_tables.sh llvm [N...]          # merge against LLVM's MergeFunctions
#                                                # (`opt -passes=mergefunc`, LLVM's `opt` on
#                                                # PATH or in $LLVM_OPT) on one generated
#                                                # module per N, written as CLIF and as LLVM
#                                                # IR (`gen --emit ll`; default 10000 100000)
#   scripts/bench_tables.sh wasmtime FILE.wasm...# Mergelift's plain compile of .wasm modules
#                                                # beside wasmtime's own (needs the CLI built
#                                                # with --features wasm)
#   scripts/bench_tables.sh wasm-time FILE.wasm...# time to an answer: `size --json` on each
#                                                # module as .wasm and as the .clif wasmtime
#                                                # wrote for it ($CLIF_DIR/NAME.clif, default
#                                                # ../shared/corpus/wasm), alternated, $RUNS
#                                                # processes each (default 5): medians of wall,
#                                                # user and sys (GNU time, /usr/bin/time); extra
#                                                # `size` options in $SIZE_ARGS (--threads 1)
#   scripts/bench_tables.sh binaryen [--opt-level L] FILE.wasm...
#                                                # Binaryen's function merging against
#                                                # Mergelift's, in wasmtime 48's code bytes:
#                                                # plain; `wasm-opt --duplicate-function-
#                                                # elimination --merge-similar-functions`
#                                                # then plain; Mergelift's default passes;
#                                                # and with merge-aligned (needs `wasm-opt`,
#                                                # Debian package binaryen; builds the CLI
#                                                # with --features wasm; opt level default
#                                                # none; $WASM_OPT_FEATURES overrides the
#                                                # --enable-* flags given to wasm-opt)
#
# Build first: `cargo build --release -p mergelift-cli`. Each row is one cold process.
set -euo pipefail
BIN=${MERGELIFT:-target/release/mergelift}
[[ ${1:-} == merged-calls || ${1:-} == binaryen || -x $BIN ]] || { echo "$BIN: not built (cargo build --release -p mergelift-cli)" >&2; exit 2; }
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
    echo "| case | without the pass | \`merge,merge-similar\` | \`merge,merge-similar,merge-aligned\` |"
    echo "|---|---:|---:|---:|"
    for c in thunk rewritten indirect aligned; do
      echo "| $c | $(ns "$c" none) | $(ns "$c" similar) | $(ns "$c" aligned) |"
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
  aligned)
    dir=${2:-../shared/corpus/wasm}
    echo "| module | opt level | plain | \`merge,merge-similar\` | + \`merge-aligned\` | saved before | saved after | gain |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|"
    for o in none speed; do
      for f in "$dir"/*.clif; do
        a=$("$BIN" size --json --opt-level "$o" --passes merge,merge-similar "$f" | json 'd["code_bytes_before"], d["code_bytes_after"]')
        b=$("$BIN" size --json --opt-level "$o" --passes merge,merge-similar,merge-aligned "$f" | json 'd["code_bytes_after"]')
        python3 -c "
p, x = $(echo "$a" | tr ' ' ','); y = $b
sa, sb = 100 * (p - x) / p, 100 * (p - y) / p
g = f'{sb / sa:.2f}x' if sa else '-'
print(f'| $(basename "$f" .clif) | $o | {p} | {x} | {y} | {sa:.2f}% | {sb:.2f}% | {g} |')"
      done
    done
    echo
    # One `--stats` run per module feeds both tables below.
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    for f in "$dir"/*.clif; do
      "$BIN" opt --passes merge,merge-similar,merge-aligned --emit none --stats "$f" 2>&1 >/dev/null | tail -1 > "$tmp/$(basename "$f" .clif)"
    done
    echo "| module | functions | candidates | groups | members | with unmatched instructions | with an extra block | diamonds | groups of 3+ | aligned | \`merge-aligned\` ms |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for f in "$dir"/*.clif; do
      m=$(basename "$f" .clif)
      json "(lambda g: f'| $m | {g(\"functions_in\")} | {g(\"aligned.candidates\")} | {g(\"aligned.groups\")} | {g(\"merged_aligned\")} | {g(\"aligned.with_unmatched_runs\")} | {g(\"aligned.with_extra_blocks\")} | {g(\"aligned.diamonds\")} | {g(\"aligned.groups_3plus\")} | {g(\"aligned.aligned\")} | {d[\"time_ms\"][\"merge-aligned\"]:.1f} |')(lambda k: d.get(k, 0))" < "$tmp/$m"
    done
    echo
    echo "Alignments rejected, by reason (\`aligned.rejected.*\` in \`--stats\`):"
    echo
    echo "| module | dissimilar | estimate | saving | share | tables | blocks | long block | codegen |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    for f in "$dir"/*.clif; do
      m=$(basename "$f" .clif)
      json "(lambda g: f'| $m | {g(\"dissimilar\")} | {g(\"estimate\")} | {g(\"saving\")} | {g(\"share\")} | {g(\"tables\")} | {g(\"blocks\")} | {g(\"long_block\")} | {g(\"codegen\")} |')(lambda k: d.get('aligned.rejected.' + k, 0))" < "$tmp/$m"
    done
    ;;
  aligned-local)
    dir=${2:-../shared/corpus/wasm}
    echo "| module | plain | \`merge,merge-similar\` | + \`merge-aligned\` | saved before | saved after | gain | members folded | members thunked |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    for f in "$dir"/*.clif; do
      a=$("$BIN" size --json --local --no-fetch-locals --passes merge,merge-similar "$f" | json 'd["code_bytes_before"], d["code_bytes_after"], d["folded"], d["thunked"]')
      b=$("$BIN" size --json --local --no-fetch-locals --passes merge,merge-similar,merge-aligned "$f" | json 'd["code_bytes_after"], d["folded"], d["thunked"]')
      python3 -c "
p, x, f0, t0 = $(echo "$a" | tr ' ' ','); y, f1, t1 = $(echo "$b" | tr ' ' ',')
sa, sb = 100 * (p - x) / p, 100 * (p - y) / p
g = f'{sb / sa:.2f}x' if sa else '-'
print(f'| $(basename "$f" .clif) | {p} | {x} | {y} | {sa:.2f}% | {sb:.2f}% | {g} | {f1 - f0} | {t1 - t0} |')"
    done
    ;;
  aligned-cost)
    shift
    sizes=${*:-10000 100000}
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    echo "| functions | edited duplicates | groups | members | groups of 3+ | \`merge-aligned\` ms | µs per function | bytes saved (estimate) |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
    for n in $sizes; do
      "$BIN" gen --functions "$n" --seed 1 --edit-ratio 0.2 > "$tmp/m.clif" 2> "$tmp/gen.txt"
      e=$(sed -E 's/.* ([0-9]+) edited duplicates.*/\1/' "$tmp/gen.txt")
      "$BIN" opt --passes merge,merge-similar,merge-aligned --emit none --stats "$tmp/m.clif" 2>&1 >/dev/null | tail -1 |
        json "f'| $n | $e | {d[\"aligned.groups\"]} | {d[\"merged_aligned\"]} | {d[\"aligned.groups_3plus\"]} | {d[\"time_ms\"][\"merge-aligned\"]:.0f} | {1e3*d[\"time_ms\"][\"merge-aligned\"]/$n:.1f} | {d[\"aligned.bytes_saved\"]} |'"
    done
    ;;
  llvm)
    shift
    OPT=${LLVM_OPT:-opt}
    command -v "$OPT" >/dev/null || { echo "no LLVM opt (set LLVM_OPT)" >&2; exit 2; }
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    wall() { /usr/bin/time -f '%e %M' "$@" 2>&1 >/dev/null | tail -1; }
    echo "| functions | tool | merged | merge pass | whole process | peak RSS |"
    echo "|---:|---|---:|---:|---:|---:|"
    for n in ${*:-10000 100000}; do
      "$BIN" gen --functions "$n" > "$tmp/g.clif" 2>/dev/null
      "$BIN" gen --functions "$n" --emit ll > "$tmp/g.ll" 2>/dev/null
      # LLVM: the pass's own time from -time-passes; merged = functions left as a thunk
      # (a tail call and a return), counted in the output.
      pass=$("$OPT" -passes=mergefunc -time-passes -disable-output "$tmp/g.ll" 2>&1 \
        | awk '/MergeFunctionsPass/ && !n++' | grep -oE '[0-9.]+ +\( *[0-9.]+%\)' | tail -1 | cut -d' ' -f1)
      merged=$("$OPT" -passes=mergefunc -S "$tmp/g.ll" -o - | python3 -c '
import re, sys
bodies = re.findall(r"^define [^\n]*\{\n(.*?)^\}", sys.stdin.read(), re.S | re.M)
thunk = re.compile(r"\s*(%\d+ = )?tail call [^\n]*\n\s*ret [^\n]*\n")
print(sum(1 for b in bodies if thunk.fullmatch(b)))')
      read -r w m < <(wall "$OPT" -passes=mergefunc -disable-output "$tmp/g.ll")
      echo "| $n | LLVM $("$OPT" --version | awk '/LLVM version/ {print $NF}') MergeFunctions | $merged | $(python3 -c "print(f'{1000*$pass:.0f} ms')") | $w s | $((m / 1024)) MiB |"
      stats=$("$BIN" opt --passes merge --emit none --stats "$tmp/g.clif" 2>&1 >/dev/null)
      merged=$(echo "$stats" | json 'd["merged"]')
      pass=$(echo "$stats" | json "'%.0f ms' % d['time_ms']['merge']")
      read -r w m < <(wall "$BIN" opt --passes merge --emit none "$tmp/g.clif")
      echo "| $n | Mergelift \`merge\` | $merged | $pass | $w s | $((m / 1024)) MiB |"
    done
    ;;
  wasmtime)
    shift
    cargo build -q --release -p mergelift-tools --features wasm --example wasmtime_text
    echo "| module | opt level | Mergelift plain | wasmtime function symbols | wasmtime .text | after merging |"
    echo "|---|---|---:|---:|---:|---:|"
    target/release/examples/wasmtime_text "$@" | tail -n +3 | while IFS='|' read -r _ f level text syms _; do
      f=$(echo $f); level=$(echo $level)
      read -r before after < <("$BIN" size --json --opt-level "$level" "$f" \
        | json "d['code_bytes_before'], d['code_bytes_after']" | tr -d '(),')
      echo "| $(basename "$f" .wasm) | $level | $before |$syms|$text| $after |"
    done
    ;;
  binaryen)
    shift
    level=none
    if [[ ${1:-} == --opt-level ]]; then level=${2:?--opt-level needs none or speed}; shift 2; fi
    [[ $# -gt 0 ]] || { echo "usage: $0 binaryen [--opt-level L] FILE.wasm..." >&2; exit 2; }
    command -v wasm-opt >/dev/null || {
      echo "wasm-opt not found: install Binaryen (Debian package \`binaryen\`: apt-get install binaryen)" >&2; exit 2; }
    # Only the features the modules use: with -all wasm-opt writes encodings wasmtime 48 rejects.
    features=${WASM_OPT_FEATURES:---enable-sign-ext --enable-simd --enable-bulk-memory --enable-nontrapping-float-to-int --enable-mutable-globals --enable-multivalue}
    if [[ -z ${MERGELIFT:-} ]]; then cargo build -q --release -p mergelift-cli --features wasm; fi
    [[ -x $BIN ]] || { echo "$BIN: not built (cargo build --release -p mergelift-cli --features wasm)" >&2; exit 2; }
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    status=0
    for f in "$@"; do
      m=$(basename "$f" .wasm)
      # shellcheck disable=SC2086
      if ! wasm-opt $features --duplicate-function-elimination --merge-similar-functions "$f" -o "$tmp/$m.wasm" 2> "$tmp/$m.err" ||
         ! wasm-opt $features "$f" -o "$tmp/$m.rt.wasm" 2>> "$tmp/$m.err"; then
        echo "$m: wasm-opt failed:" >&2; cat "$tmp/$m.err" >&2; status=1; continue
      fi
      pd=$("$BIN" size --json --opt-level "$level" "$f" | json "d['code_bytes_before'], d['code_bytes_after']")
      read -r plain dflt <<< "$(echo "$pd" | tr -d '(),')"
      # The control: wasm-opt's round trip alone (no pass), which changes the code by itself.
      rt=$("$BIN" size --json --opt-level "$level" --passes none "$tmp/$m.rt.wasm" | json "d['code_bytes_before']")
      bin=$("$BIN" size --json --opt-level "$level" --passes none "$tmp/$m.wasm" | json "d['code_bytes_before']")
      aligned=$("$BIN" size --json --opt-level "$level" --passes merge,merge-similar,merge-aligned "$f" | json "d['code_bytes_after']")
      echo "$m $plain $rt $bin $dflt $aligned" >> "$tmp/rows"
    done
    [[ -s $tmp/rows ]] || exit 1
    python3 - "$tmp/rows" "$level" "$(wasm-opt --version)" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
level, version = sys.argv[2], sys.argv[3]
rows = [(m, *map(int, r)) for m, *r in rows]
rows.append(("**total**", *(sum(r[i] for r in rows) for i in range(1, 6))))
pct = lambda p, x: f"{100 * (p - x) / p:.2f}%"
print(f"Opt level `{level}`; Binaryen is {version}.")
print()
print("| module | plain | wasm-opt, no pass | Binaryen DFE + merge-similar | saved | Mergelift default | saved | + `merge-aligned` | saved |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for m, p, r, b, d, a in rows:
    print(f"| {m} | {p} | {r} | {b} | {pct(p, b)} | {d} | {pct(p, d)} | {a} | {pct(p, a)} |")
_, p, r, b, d, a = rows[-1]
print()
if p > b:
    times = lambda x: f"{(p - x) / (p - b):.1f}x"
    print(f"In total, Mergelift default saves {times(d)} what Binaryen saves; with `merge-aligned`, {times(a)}.")
else:
    print(f"In total Binaryen saves nothing (the code grows {pct(p, b)[1:]}); Mergelift default saves {pct(p, d)},"
          f" with `merge-aligned` {pct(p, a)}.")
print(f"Saved is of plain. wasm-opt's round trip alone (no pass) changes the code by {100 * (r - p) / p:+.2f}%;"
      f" against it, Binaryen's two passes save {pct(r, b)}.")
PY
    exit $status
    ;;
  wasm-time)
    shift
    runs=${RUNS:-5}
    dir=${CLIF_DIR:-../shared/corpus/wasm}
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    echo "| module | input | wall s | user s | sys s | sys / wall | wall / .clif's |"
    echo "|---|---|---:|---:|---:|---:|---:|"
    for f in "$@"; do
      m=$(basename "$f" .wasm)
      clif=$dir/$m.clif
      [[ -f $clif ]] || { echo "$clif: missing" >&2; exit 2; }
      : > "$tmp/wasm"; : > "$tmp/clif"
      for _ in $(seq "$runs"); do
        for kind in wasm clif; do
          if [[ $kind == wasm ]]; then input=$f; else input=$clif; fi
          # shellcheck disable=SC2086
          /usr/bin/time -f '%e %U %S' -o "$tmp/one" "$BIN" size --json ${SIZE_ARGS:-} "$input" > /dev/null
          cat "$tmp/one" >> "$tmp/$kind"
        done
      done
      python3 - "$m" "$tmp/wasm" "$tmp/clif" <<'PY'
import statistics, sys
m, wasm, clif = sys.argv[1], sys.argv[2], sys.argv[3]
med = lambda path: [statistics.median(float(l.split()[i]) for l in open(path) if l.strip()) for i in range(3)]
w, c = med(wasm), med(clif)
print(f"| {m} | .wasm | {w[0]:.2f} | {w[1]:.2f} | {w[2]:.2f} | {100 * w[2] / w[0]:.0f}% | {w[0] / c[0]:.2f}x |")
print(f"| {m} | .clif | {c[0]:.2f} | {c[1]:.2f} | {c[2]:.2f} | {100 * c[2] / c[0]:.0f}% | |")
PY
    done
    ;;
  *) echo "usage: $0 bytes [CORPUS_DIR] | shapes [N...] | ratios [FILE...] | merged-calls | aligned [CORPUS_DIR] | aligned-cost [N...] | llvm [N...] | wasmtime FILE.wasm... | wasm-time FILE.wasm... | binaryen [--opt-level L] FILE.wasm..." >&2; exit 2;;
esac
