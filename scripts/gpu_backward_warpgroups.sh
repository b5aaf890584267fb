#!/usr/bin/env bash
# Runs on the GPU machine from the repo root, with .device/ carried: the backward with dK and dV on
# the two warpgroups of one launch (FLASHJIT_BWD_WARPGROUPS, on by default; configs 32,64,8,STAGES;
# docs/perf-notes.md §25) — its `[warpgroups]` test against the fp64 reference (head dims 160,
# 192/128, 256; masks, scores, tensor masks, GQA/MQA, strides, odd lengths, deterministic calls) —
# then its time beside the two-launch form (the knob off) at the standard d=256 shapes (16k
# tokens, hidden 2048). Full logs in $OUT/bwd-wg-*.txt; a table is printed last.
set -u
source scripts/gpu_env.sh
export FLASHJIT_AUTOTUNE=off
V="$OUT/bwd-wg-tests.txt" T="$OUT/bwd-wg-time.txt"
$D/flashjit_tests --durations yes "[warpgroups]" > "$V" 2>&1; rc=$?
: > "$T"
C="--backward-config 32,64,8,2"  # what the heuristic takes, given explicitly
rows=()
for sb in "1024 16" "4096 4" "16384 1"; do
  set -- $sb
  for mask in none causal; do
    run=(--head-dim 256 --mask $mask --seq $1 --batch $2 --heads 8 --backward --no-verify --reps 10)
    a=$(FLASHJIT_BWD_WARPGROUPS=off $D/flashjit run "${run[@]}" 2>&1 | tee -a "$T" | grep "ms backward (median)" | grep -oE "[0-9.]+ ms")
    b=$($D/flashjit run "${run[@]}" $C 2>&1 | tee -a "$T" | grep "ms backward (median)" | grep -oE "[0-9.]+ ms")
    rows+=("$(printf 'd=256 seq=%-6s %-7s two launches %-12s warpgroups %s' "$1" "$mask" "$a" "$b")")
  done
done
echo "==================== summary"
echo "[warpgroups]: $(grep -c '^GPUCASE backward.* PASS ' "$V") PASS, $(grep -c '^GPUCASE backward.* FAIL ' "$V") FAIL, exit $rc"
grep '^GPUCASE backward.* FAIL ' "$V" | head -8
tail -3 "$V"
printf '%s\n' "${rows[@]}"
