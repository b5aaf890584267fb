#!/usr/bin/env bash
# The forward with the default assembler choice (FLASHJIT_PTXAS=auto, the machine's CUDA toolkit):
# the assembler-fault test, the standard suite at d=128 against cuDNN, then the [gpu] forward tests
# for as long as the call allows. Run from the repository root with .device/ carried.
set -u
source scripts/gpu_env.sh
export CUDA_CACHE_DISABLE=1 FLASHJIT_AUTOTUNE=off
FLASHJIT_CACHE_DIR=/tmp/c-f timeout -k 3 20 $D/flashjit run --head-dim 128 --mask causal --seq 1000 --batch 2 2>&1 | grep -E "^(device|kernel|verify)" | cut -c1-200
FLASHJIT_CACHE_DIR=/tmp/c-f timeout -k 3 25 $D/flashjit_tests "[faults]" > $OUT/faults.txt 2>&1; echo "faults exit $?"; tail -2 $OUT/faults.txt
env LD_LIBRARY_PATH=$PWD/.device FLASHJIT_LIB=$PWD/.device/libflashjit.so.0 FLASHJIT_CACHE_DIR=/tmp/c-s timeout -k 3 60 \
  python3 bench/bench.py --suite standard --dims 128 --backends flashjit,sdpa-cudnn --out /tmp/o-s > $OUT/std.txt 2>&1
echo "std exit $?"; grep -E "^(torch|standard)" $OUT/std.txt | cut -c1-110
FLASHJIT_CACHE_DIR=/tmp/c-t timeout -k 3 85 $D/flashjit_tests "[gpu]~[backward]~[tune]~[paged]~[split]~[varlen]~[faults]" \
  > $OUT/fwd-tests.txt 2>&1; echo "tests exit $?"; grep -c "^GPUCASE.*PASS" $OUT/fwd-tests.txt; grep -c "FAIL" $OUT/fwd-tests.txt; tail -2 $OUT/fwd-tests.txt
