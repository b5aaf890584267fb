#!/usr/bin/env bash
# Runs on the GPU machine from the repo root, .device/ carried: where the backward's time goes on
# the sparse masks at 16k tokens (DIMS, default 128; batch 1, 2048/d heads, seq 16384), in sections
# chosen by environment variables (docs/perf-notes.md §30):
#   NCU_MASKS (default "causal swa1024"; also swa512, swa2048, swa4096): Nsight Compute times each
#     kernel of one backward, default (dQ summed by the dK/dV kernel) and --deterministic (dQ kernel);
#   RUN_MASKS (default "causal swa1024"): `flashjit run --backward` ms, both paths;
#   SWEEP="bm,bn,w,s;...": those backward configs on causal and swa1024, both paths;
#   STALLS=1: the deterministic dK/dV kernel's warp states (causal, swa1024) and its time with 4 KV heads;
#   TUNE (default 1; 0 skips): the tuner's full search of the swa1024 backward;
#   AB="VAR=a VAR=b" (e.g. "FLASHJIT_BWD_PRODUCER=off FLASHJIT_BWD_PRODUCER=on"): the NCU_MASKS and
#     RUN_MASKS sections once per setting, in that order, each labelled with it; the last setting
#     stays set for the sections after them.
# Logs in $OUT/prof-*; a table is printed last.
set -u
source scripts/gpu_env.sh
export FLASHJIT_AUTOTUNE=off PYTHONUNBUFFERED=1
[ -n "$NCU" ] || { echo "gpu_bwd_profile.sh: no ncu (Nsight Compute) on this machine" >&2; exit 2; }
d=${DIMS:-128}
h=$((2048 / d))
rows=()
declare -A MASK=([causal]="causal" [swa1024]="window(1023, 0) && causal" [swa512]="window(511, 0) && causal"
  [swa2048]="window(2047, 0) && causal" [swa4096]="window(4095, 0) && causal")
# `flashjit run --backward` of this d at 16k tokens on mask $1 (a MASK key), more flags after it.
bwd_run() { local m=$1; shift; $D/flashjit run --head-dim "$d" --mask "${MASK[$m]}" --seq 16384 --batch 1 --heads $h --backward "$@"; }
for ab in ${AB:-default}; do
  [ "$ab" = default ] || export "$ab"
  tag=${ab/default/}; tag=${tag:+ [$tag]}
  for m in ${NCU_MASKS-causal swa1024}; do
    for det in "" --deterministic; do
      f="$OUT/prof-ncu-$m$det${ab/*=/-}.csv"
      FLASHJIT_CACHE_DIR=/tmp/fjc-prof timeout 200 "$NCU" --clock-control none --metrics gpu__time_duration.sum \
        --print-units base --csv $D/flashjit run --head-dim "$d" --mask "${MASK[$m]}" --seq 16384 --batch 1 --heads $h \
        --backward $det --no-verify --reps 1 > "$f" 2>&1
      rows+=("ncu d=$d 16k $m ${det:-default}$tag: $(kernel_times "$f")")
    done
  done
  for m in ${RUN_MASKS-causal swa1024}; do
    for det in "" --deterministic; do
      ms=$(FLASHJIT_CACHE_DIR=/tmp/fjc-prof bwd_run $m $det --no-verify --reps 20 2>&1 | tee -a "$OUT/prof-runs.txt" | grep -E "ms (backward )?\(median\)" | grep -oE "[0-9.]+ ms" | tr '\n' ' ')
      rows+=("run d=$d 16k $m ${det:-default}$tag: fwd/bwd $ms")
    done
  done
done
# SWEEP="cfg;cfg..." : each backward config, default and deterministic, on both masks.
SWEEP=${SWEEP:-}
for cfg in ${SWEEP//;/ }; do
  for m in causal swa1024; do
    line="sweep d=$d 16k $m $cfg ms (default, deterministic):"
    for det in "" --deterministic; do
      ms=$(FLASHJIT_CACHE_DIR=/tmp/fjc-prof bwd_run $m --backward-config "$cfg" $det --no-verify --reps 20 2>&1 | tee -a "$OUT/prof-sweep.txt" | grep -E "ms backward \(median\)" | grep -oE "[0-9.]+ ms")
      line+=" ${ms:-?}"
    done
    rows+=("$line")
  done
done
if [ "${TUNE:-1}" = 1 ]; then
  printf 'name: swa\ndtype: bf16\nhead_dim: %s\nmask: "window(1023, 0) && causal"\n' "$d" > /tmp/prof_swa.yaml
  FLASHJIT_CACHE_DIR=/tmp/fjc-prof-tune timeout 240 $D/flashjit tune /tmp/prof_swa.yaml --backward --shapes 1x${h}x16384x16384 \
    --mode full > "$OUT/prof-tune.txt" 2>&1
  rows+=("tune --backward full, swa1024 d=$d 16k (exit $?):")
  while read -r l; do rows+=("  $l"); done < <(tail -25 "$OUT/prof-tune.txt")
fi
# STALLS=1: Nsight Compute's warp-state breakdown of the deterministic dK/dV kernel, causal against
# the window of 1024, and the same kernel's time with 4 KV heads (GQA 4:1: a CTA walks 4 heads per
# K/V load and epilogue).
if [ "${STALLS:-0}" = 1 ]; then
  for m in causal swa1024; do
    FLASHJIT_CACHE_DIR=/tmp/fjc-prof timeout 200 "$NCU" --clock-control none --kernel-name regex:'_kv$' --launch-skip 1 --launch-count 1 \
      --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active' \
      --csv --print-units base $D/flashjit run --head-dim "$d" \
      --mask "${MASK[$m]}" --seq 16384 --batch 1 --heads $h --backward --deterministic --no-verify --reps 2 > "$OUT/prof-stalls-$m.csv" 2>&1
    rows+=("stalls $m (warps per issue, top): $(python3 -c '
import csv, sys
v = {}
for r in csv.reader(open(sys.argv[1])):
    if len(r) > 3 and (r[-3].startswith("smsp__") or r[-3].startswith("gpu__")):
        v[r[-3].replace("smsp__average_warps_issue_stalled_", "").replace("_per_issue_active.ratio", "")] = float(r[-1].replace(",", ""))
print(" ".join(f"{k}={x:.2f}" for k, x in sorted(v.items(), key=lambda kv: -kv[1])[:12]))' "$OUT/prof-stalls-$m.csv" 2>&1)")
  done
  for hkv in $h 4; do
    FLASHJIT_CACHE_DIR=/tmp/fjc-prof timeout 200 "$NCU" --clock-control none --metrics gpu__time_duration.sum --print-units base --csv \
      $D/flashjit run --head-dim "$d" --mask "${MASK[swa1024]}" --seq 16384 --batch 1 --heads $h --heads-kv $hkv --backward \
      --deterministic --no-verify --reps 1 > "$OUT/prof-gqa-$hkv.csv" 2>&1
    rows+=("swa1024 det heads_kv=$hkv: $(kernel_times "$OUT/prof-gqa-$hkv.csv")")
  done
fi
echo "==================== summary"
printf '%s\n' "${rows[@]}"
