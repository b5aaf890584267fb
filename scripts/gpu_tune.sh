#!/usr/bin/env bash
# Quick-mode tuning of the 18 standard shapes (docs/perf-notes.md, method: d ∈ {64,128,256} × seq ∈ {1k,4k,16k} ×
# none/causal, batch·seq = 16k, heads = 2048/d) on the GPU machine: progress lines and the
# tuned-vs-heuristic summary per spec, the wall time per spec, then what the tuning cache holds.
set -u
source scripts/gpu_env.sh
L="$OUT/tune.txt"
: > "$L"
for d in ${TUNE_DIMS:-64 128 256}; do
  for mask in none causal; do
    printf 'name: std_d%s_%s\ndtype: bf16\nhead_dim: %s\nmask: %s\n' "$d" "$mask" "$d" "$mask" > "/tmp/tune_${d}_${mask}.yaml"
    shapes="$((16384 / 1024))x$((2048 / d))x1024x1024,$((16384 / 4096))x$((2048 / d))x4096x4096,1x$((2048 / d))x16384x16384"
    echo "=== d=$d mask=$mask shapes $shapes" >> "$L"
    /usr/bin/time -f "wall %e s for 3 buckets" $D/flashjit tune "/tmp/tune_${d}_${mask}.yaml" --shapes "$shapes" --mode quick >> "$L" 2>&1
  done
done
$D/flashjit cache list >> "$L" 2>&1
grep -E "^(===|[0-9]+x[0-9]+x|wall)" "$L"
