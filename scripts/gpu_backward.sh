#!/usr/bin/env bash
# Runs on the GPU machine from the repo root, with .device/ carried: the backward's tests (wgmma,
# then FLASHJIT_MMA=sync for the head-dim matrix), then `flashjit run --backward` at the standard
# shapes (16k tokens, hidden 2048; timing only: the tests verify). Full logs go to $OUT; a short
# table is printed last. Extra arguments replace the test filter (default "[backward]").
set -u
source scripts/gpu_env.sh
export CUDA_CACHE_DISABLE=1
T="$OUT/bwd-tests.txt" S="$OUT/bwd-tests-sync.txt" R="$OUT/bwd-runs.txt"
FILTER=("${@:-[backward]}")
$D/flashjit_tests --durations yes "${FILTER[@]}" > "$T" 2>&1; rc=$?
FLASHJIT_MMA=sync $D/flashjit_tests "gpu backward: head dims*" > "$S" 2>&1; rc_sync=$?
: > "$R"
if [ "${BWD_RUNS:-1}" = 1 ]; then
  for d in 64 128; do
    for mask in none causal; do
      printf 'name: bwd\ndtype: bf16\nhead_dim: %s\nmask: %s\n' "$d" "$mask" > "$OUT/bwd-$d-$mask.yaml"
      for sb in "1024 16" "4096 4" "16384 1"; do
        set -- $sb
        echo "=== d=$d mask=$mask seq=$1 batch=$2" >> "$R"
        $D/flashjit run "$OUT/bwd-$d-$mask.yaml" --seq "$1" --batch "$2" --backward --no-verify --reps 10 >> "$R" 2>&1
        echo "exit $?" >> "$R"
      done
    done
  done
fi
echo "==================== summary"
echo "wgmma:      $(grep -c '^GPUCASE backward.* PASS ' "$T") PASS, $(grep -c '^GPUCASE backward.* FAIL ' "$T") FAIL"
grep '^GPUCASE backward.* FAIL ' "$T" | head -12
tail -3 "$T"; echo "flashjit_tests exit $rc"
echo "mma.sync:   $(grep -c '^GPUCASE backward.* PASS ' "$S") PASS, $(grep -c '^GPUCASE backward.* FAIL ' "$S") FAIL"
grep '^GPUCASE backward.* FAIL ' "$S" | head -6
tail -2 "$S"; echo "flashjit_tests (sync) exit $rc_sync"
grep -E "^(===|time|perf|exit [^0])" "$R" | paste - - - - - 2>/dev/null | sed 's/time *//g;s/perf *//g;s/ (median)//g' | head -30
