#!/usr/bin/env bash
# The whole benchmark on the GPU machine, from the repository root, in one command:
#   bash bench/run_gpu.sh                  # suites: standard masks (docs/perf-notes.md)
#   bash bench/run_gpu.sh quick            # a smoke test of every backend (about a minute)
#   bash bench/run_gpu.sh standard masks scores -- --dims 128   # extra bench.py flags after --
# Needs .device/ from scripts/gpu_bundle.sh (libflashjit.so + libyaml-cpp); torch, triton and
# matplotlib from the machine. Writes $OUT/bench.json (rewritten after every case, so a run cut
# short keeps what it measured), $OUT/bench.png, $OUT/bench.log and $OUT/gpu.txt; the table is
# printed last. $OUT defaults to ./bench-out. Exit 0 when every case ran (a flashjit "unsupported"
# or a failed check is a result, shown in the table, not an exit status).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH="$PWD/.device${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FLASHJIT_LIB="${FLASHJIT_LIB:-$PWD/.device/libflashjit.so.0}"
# The heuristic table's kernels, as every figure in docs/perf-notes.md (tuned vs heuristic comes
# from `flashjit tune`, scripts/gpu_tune.sh). FLASHJIT_AUTOTUNE=quick measures tuned kernels
# (each bucket is tuned during the warm-up of its first case).
export FLASHJIT_AUTOTUNE="${FLASHJIT_AUTOTUNE:-off}"
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-/tmp/flashjit-bench-inductor}"
OUT="${OUT:-$PWD/bench-out}"
mkdir -p "$OUT"

suites=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do suites+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#suites[@]} -eq 0 ] && suites=(standard masks)

if [ ! -f "$FLASHJIT_LIB" ]; then
  echo "run_gpu.sh: $FLASHJIT_LIB not found; build here and run scripts/gpu_bundle.sh, then carry .device" >&2
  exit 2
fi
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv 2>&1
  python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)' 2>&1
} > "$OUT/gpu.txt"
cat "$OUT/gpu.txt"

# exec: python gets SIGTERM directly (it then writes the JSON, plot and table of what it measured).
# BENCH_BUDGET_S (default 540 s, under a 10-minute command limit): no new case starts after it.
# Everything printed also goes to bench.log (bounded: one line per measurement, the table last).
export BENCH_BUDGET_S="${BENCH_BUDGET_S:-540}"
exec python3 bench/bench.py --suite "${suites[@]}" --out "$OUT" --log "$OUT/bench.log" "$@"
