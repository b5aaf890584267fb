#!/usr/bin/env bash
# Runs on the GPU machine from the repo root, with .device/ carried: compute-sanitizer's racecheck
# (and memcheck on the last case) on `flashjit run` of the kernels that share memory between warp
# roles: the persistent forward (the claimed tile's hand-over between the producer and the compute
# warps) at d=128 causal, with a document mask (block map) and at d=256 causal, and the backward:
# at d=128 (the dK/dV kernel's producer warpgroup and its mbarrier ring; causal with GQA 4:1, so the
# ring runs across query heads, and a document mask, whose walk is a list) and at d=256 causal (dK
# and dV on two warpgroups, also fed by the producer, P handed over through two buffers; dQ on two
# warpgroups); and at d=64 with 64-query tiles on 8 warps, where the producer's kernel also adds dQ
# (causal with GQA 4:1). The causal forward cases at d=64 and d=128 take their query tiles longest
# first across head groups (templates/fwd/tile_order.hpp) whose last group is short: at seq 1000 a
# group holds 65 heads at d=64 (the CTA-wide grid, one batch's 72 heads: 65 + 7) and 32
# head-batches at d=128 (the persistent walk over 24 heads x 2 batches: 32 + 16). Each run also
# checks its result against the fp64 reference. Logs in $OUT/racecheck-kernels.txt; a table is
# printed last.
set -u
source scripts/gpu_env.sh
L="$OUT/racecheck-kernels.txt"
: > "$L"
export FLASHJIT_CACHE_DIR=/tmp/fjc-racecheck
# The heuristic's kernels only: quick tuning would time every candidate config under the tool,
# past the per-case limit below.
export FLASHJIT_AUTOTUNE=off
shape=(--seq 1000 --batch 2 --reps 1)
cases=("--head-dim 128 --mask causal --heads 24" "--head-dim 64 --mask causal --heads 72"
       "examples/specs/document_mask.yaml --heads 16"
       "--head-dim 256 --mask causal --heads 16" "--head-dim 128 --mask causal --heads 8 --heads-kv 2 --backward"
       "examples/specs/document_mask.yaml --heads 8 --backward"
       "--head-dim 64 --mask causal --heads 8 --heads-kv 2 --backward --backward-config 64,128,8,2"
       "--head-dim 256 --mask causal --heads 8 --backward")
rows=()
for c in "${cases[@]}"; do
  # ONLY=regex: the cases whose flags match it (e.g. ONLY=--backward).
  [[ -n "${ONLY:-}" && ! "$c" =~ ${ONLY:-} ]] && continue
  for tool in racecheck memcheck; do
    [ $tool = memcheck ] && [ "$c" != "${cases[-1]}" ] && continue
    extra=(); [ $tool = racecheck ] && extra=(--racecheck-report all)
    # shellcheck disable=SC2086
    out=$(timeout 75 "$CS" --tool $tool "${extra[@]}" --print-limit 20 $D/flashjit run $c "${shape[@]}" 2>&1)
    rc=$?
    { echo "=== $tool: $c (exit $rc)"; echo "$out"; } >> "$L"
    verdicts=$(echo "$out" | grep -oE "PASS|FAIL" | sort | uniq -c | tr -s ' \n' ' ')
    rows+=("$(printf '%-10s %-55s exit %-3s %s | %s' $tool "$c" $rc "$(echo "$out" | grep -oE '(RACECHECK|ERROR) SUMMARY.*' | tail -1)" "$verdicts")")
  done
done
echo "==================== racecheck"
printf '%s\n' "${rows[@]}"
