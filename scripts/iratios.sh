#!/bin/bash
# Pipeline/plain compile ratios in machine instructions executed, not time: exact and
# deterministic, so they do not swing with a shared machine's load the way `ratios.sh`'s
# timings do. They leave out what instruction counts cannot see (cache misses, first touches
# of fresh memory, page faults), which `ratios.sh` measures; read the two side by side.
#
#   scripts/iratios.sh [--opt-level none|speed] [--passes LIST] [--verifier on|off] FILES...
#
# `--verifier off` compiles a copy of each file headed `set enable_verifier=false` (with the
# frame pointers a headerless file gets), as production runtimes such as wasmtime run;
# the default is Cranelift's default, on. A file with its own `set` or `target` lines is
# taken as it is.
#
# Both sides compile on one thread (`--threads 1`): callgrind counts every thread's work, but
# only the caller's inside the two phases, and how compiles spread over threads depends on the
# machine's load.
#
# Needs valgrind (callgrind). Runs `mergelift size --first plain FILE` once per file under
# callgrind, which dumps its counters when the pipeline starts: the first part holds the plain
# compile (`compile_plain`), the second the pipeline (`compile_pipeline`: lift, passes, lower,
# and Cranelift compiling what is left). In each, Cranelift's compile proper is
# `Context::compile_stencil`; the rest is the object module's bookkeeping, which both sides
# pay, and on the pipeline's side Mergelift's own work. About 50 times slower than a native
# run: half a minute for a 600-function module, four minutes for a generated 10k.
#
# Prints per file: plain and pipeline instructions and their ratio; `own`, what the pipeline
# executes beyond the plain side other than compiling (its non-compile instructions minus the
# plain side's), also as a share of the plain side; and `compile`, Cranelift's compile in the
# pipeline over the plain one (what merging saved).
set -euo pipefail
BIN=${MERGELIFT:-target/release/mergelift}
OPT=none
PASSES=merge,merge-similar
VERIFIER=on
while [[ $# -gt 0 ]]; do
  case $1 in
    --opt-level) OPT=$2; shift 2;;
    --passes) PASSES=$2; shift 2;;
    --verifier) VERIFIER=$2; shift 2;;
    *) break;;
  esac
done
command -v valgrind >/dev/null || { echo "iratios.sh: valgrind is needed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-22s %14s %14s %7s %12s %7s %8s\n' module plain pipeline ratio own own% compile
for f in "$@"; do
  input=$f
  if [[ $VERIFIER == off ]] && ! grep -q -m1 -E '^(set|target) ' "$f"; then
    input=$tmp/$(basename "$f")
    { printf 'set preserve_frame_pointers=true\nset enable_verifier=false\ntarget x86_64\n'; cat "$f"; } >"$input"
  fi
  valgrind --tool=callgrind --dump-before='*size::compile_pipeline' \
    --callgrind-out-file="$tmp/cg" "$BIN" size --json --first plain --threads 1 --opt-level "$OPT" --passes "$PASSES" "$input" \
    >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  plain=$(callgrind_annotate --inclusive=yes "$tmp/cg.1" 2>/dev/null |
    awk '/size::compile_plain \[/ {gsub(",", "", $1); if (!n++) print $1}')
  pipe=$(callgrind_annotate --inclusive=yes "$tmp/cg" 2>/dev/null |
    awk '/size::compile_pipeline \[/ {gsub(",", "", $1); if (!n++) print $1}')
  cl_pipe=$(callgrind_annotate --inclusive=yes "$tmp/cg" 2>/dev/null |
    awk '/Context::compile_stencil \[/ {gsub(",", "", $1); if (!n++) print $1}')
  cl_plain=$(callgrind_annotate --inclusive=yes "$tmp/cg.1" 2>/dev/null |
    awk '/Context::compile_stencil \[/ {gsub(",", "", $1); if (!n++) print $1}')
  if [[ -z $plain || -z $pipe || -z $cl_pipe || -z $cl_plain ]]; then
    echo "iratios.sh: $f: a phase is missing from callgrind's profile (inlined or renamed?)" >&2
    exit 1
  fi
  python3 -c "
import sys
name, plain, pipe, clp, cl0 = sys.argv[1].split('/')[-1], *map(int, sys.argv[2:])
own = (pipe - clp) - (plain - cl0)
print('%-22s %14s %14s %7.3f %12s %6.1f%% %7.3f' % (name, format(plain, ','), format(pipe, ','),
      pipe / plain, format(own, ','), 100 * own / plain, clp / cl0))
" "$f" "$plain" "$pipe" "$cl_pipe" "$cl_plain"
  rm -f "$tmp"/cg* "$tmp"/*.clif
done
