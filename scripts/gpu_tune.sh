#!/usr/bin/env bash
# Quick-mode tuning of the standard shapes (DESIGN §9, 4k) on the GPU machine: progress and the
# tuned-vs-heuristic summary per spec, then what the tuning cache holds.
set -u
D=.device
export LD_LIBRARY_PATH=$PWD/$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/flashjit-out}
mkdir -p "$OUT"
L="$OUT/tune.txt"
: > "$L"
tune() {  # d mask heads
  printf 'name: std_d%s_%s\ndtype: bf16\nhead_dim: %s\nmask: %s\n' "$1" "$2" "$1" "$2" > "/tmp/tune_$1_$2.yaml"
  echo "=== d=$1 mask=$2" | tee -a "$L"
  /usr/bin/time -f "wall %e s" $D/flashjit tune "/tmp/tune_$1_$2.yaml" --shapes "4x$3x4096x4096" --mode quick >> "$L" 2>&1
  tail -n 6 "$L"
}
tune 64 none 32
tune 128 causal 16
tune 256 causal 8
$D/flashjit cache list 2>&1 | tee -a "$L" | tail -n 8
