#!/usr/bin/env bash
# Runs on the GPU machine from the repo root, with .device/ carried: every test (the [gpu] ones
# included), `flashjit info`, and `flashjit run` on the standard shapes. Full logs go to $OUT;
# a short table is printed last.
set -u
D=.device
OUT=${OUT:-/tmp/flashjit-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/nvidia-smi.txt" 2>&1
$D/flashjit info > "$OUT/info.txt" 2>&1; info_rc=$?
$D/flashjit_tests --durations yes > "$OUT/tests.txt" 2>&1; tests_rc=$?
runs=(
  "--seq 4096 --batch 4"                                   # default spec: bf16 d=128 causal
  "examples/basic/bf16_d128.yaml --seq 4096 --batch 4"
  "examples/basic/bf16_d64.yaml --seq 4096 --batch 4"
  "examples/basic/bf16_d64_causal.yaml --seq 4096 --batch 4"
  "--seq 1024 --batch 16"
  "--seq 16384 --batch 1"
)
: > "$OUT/runs.txt"
for r in "${runs[@]}"; do
  echo "=== flashjit run $r" >> "$OUT/runs.txt"
  $D/flashjit run $r >> "$OUT/runs.txt" 2>&1; echo "exit $?" >> "$OUT/runs.txt"
done
echo "==================== summary"
cat "$OUT/info.txt"
echo "flashjit info exit $info_rc"
grep -E "^GPUCASE" "$OUT/tests.txt" | sed 's/^GPUCASE //' | awk '{print}' > "$OUT/gpucases.txt"
echo "GPU cases: $(grep -c PASS "$OUT/gpucases.txt") PASS, $(grep -c FAIL "$OUT/gpucases.txt") FAIL"
grep FAIL "$OUT/gpucases.txt" | head -20
tail -4 "$OUT/tests.txt"
echo "flashjit_tests exit $tests_rc"
grep -E "^(===|spec|shape|kernel|verify|time|perf|exit)" "$OUT/runs.txt"
