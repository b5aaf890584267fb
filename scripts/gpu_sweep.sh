#!/usr/bin/env bash
# Tile-config sweep on the GPU machine: every config verified and timed on the same inputs per
# spec (`flashjit run --config a;b;...`), at the standard 4k shape (batch 4, hidden 2048).
set -u
source scripts/gpu_env.sh
L="$OUT/sweep.txt"
: > "$L"
sweep() {  # d mask configs
  printf 'dtype: bf16\nhead_dim: %s\nmask: %s\n' "$1" "$2" > /tmp/sweep.yaml
  echo "=== d=$1 mask=$2" >> "$L"
  $D/flashjit run /tmp/sweep.yaml --seq 4096 --batch 4 --config "$3" >> "$L" 2>&1
}
for mask in none causal; do
  sweep 64 $mask "${SWEEP_64:-64,64,4,2;128,64,4,2;128,32,4,2;128,64,8,2;128,128,8,2;64,128,4,2}"
  sweep 128 $mask "${SWEEP_128:-64,64,4,2;128,32,4,2;128,64,8,2;64,32,4,2;64,64,4,3;128,32,8,2}"
  sweep 256 $mask "${SWEEP_256:-64,32,4,2;64,32,4,1;128,32,8,2;64,32,4,3;32,32,2,2}"
done
grep -E "^(===|kernel|verify|perf|config)" "$L" | sed -E 's/ \(heuristic table[^)]*\)//; s/kernel   [0-9a-f]+ attention_fwd\/(mma16816|wgmma) bf16 /\1 /; s/verify   (PASS|FAIL).*/verify \1/'
