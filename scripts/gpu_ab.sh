#!/usr/bin/env bash
# Runs on the GPU machine from the repo root, with .device/ carried: this build's library beside a
# baseline's (.device/old/libflashjit.so.0.xz: `BASELINE=<commit> scripts/gpu_bundle.sh` builds it;
# .device/old/COMMIT names it), each in processes of its own, in the order baseline, this build, so
# that a change's gain is measured side by side on one machine. Sections (any of): fwd (bench.py
# standard suite, flashjit only, FLASHJIT_AUTOTUNE=off), fwdmasks (its masks suite at 16k), bwd (`flashjit run --backward` backward ms,
# then bench_backward.py with FlashAttention-2 in each process and cuDNN in this build's), bwdruns
# (those runs only), ncu (the backward's kernels timed one by one by Nsight Compute). DIMS (default
# 128 for fwd, 256 for bwd and ncu) and SEQS (1024,4096,16384) select the shapes. Logs in
# $OUT/ab-*.txt; a table is printed last.
set -u
source scripts/gpu_env.sh
export FLASHJIT_AUTOTUNE=off PYTHONUNBUFFERED=1
OLD=/tmp/flashjit-baseline
if [ ! -f $D/old/libflashjit.so.0.xz ]; then
  echo "gpu_ab.sh: no baseline in $D/old/ (BASELINE=<commit> scripts/gpu_bundle.sh builds it)" >&2
  exit 2
fi
mkdir -p "$OLD" && xz -dc $D/old/libflashjit.so.0.xz > "$OLD/libflashjit.so.0" && ln -sf libflashjit.so.0 "$OLD/libflashjit.so"
SEQS=${SEQS:-1024,4096,16384}
rows=()
lib_of() { [ "$1" = old ] && echo "$OLD" || echo "$PWD/$D"; }
# flashjit's CLI against either library (the C ABI is the same): the baseline's folder first.
fj() { local which=$1; shift; LD_LIBRARY_PATH="$(lib_of "$which"):$LD_LIBRARY_PATH" FLASHJIT_CACHE_DIR=/tmp/fjc-$which $D/flashjit "$@"; }
tokens() { echo $((16384 / $1)); }

for section in "$@"; do
  case $section in
  fwd)
    for which in old new; do
      FLASHJIT_LIB="$(lib_of $which)/libflashjit.so.0" FLASHJIT_CACHE_DIR=/tmp/fjc-bench-$which \
        sampled "$OUT/smi-fwd-$which.csv" timeout 240 python3 bench/bench.py --suite standard --dims "${DIMS:-128}" --seqs "$SEQS" --backends flashjit \
        --out "$OUT/fwd-$which" > "$OUT/ab-fwd-$which.txt" 2>&1
      rows+=("fwd $which TFLOP/s: $(grep -E '^standard ' "$OUT/ab-fwd-$which.txt" | awk -F'|' '{n = split($1, a, " "); printf "%s/%s=%s ", a[n - 2], a[2], $2 + 0}')")
      rows+=("  card: $(smi_summary "$OUT/smi-fwd-$which.csv")")
    done ;;
  fwdmasks)
    for which in old new; do
      FLASHJIT_LIB="$(lib_of $which)/libflashjit.so.0" FLASHJIT_CACHE_DIR=/tmp/fjc-mbench-$which \
        sampled "$OUT/smi-fwdmasks-$which.csv" timeout 240 python3 bench/bench.py --suite masks --dims "${DIMS:-128}" --seqs 16384 --backends flashjit \
        --out "$OUT/fwdmasks-$which" > "$OUT/ab-fwdmasks-$which.txt" 2>&1
      rows+=("fwd masks 16k $which TFLOP/s: $(grep -E '^masks ' "$OUT/ab-fwdmasks-$which.txt" | awk -F'|' '{split($1, a, " "); printf "d%s/%s=%s ", a[3], a[2], $2 + 0}')")
      rows+=("  card: $(smi_summary "$OUT/smi-fwdmasks-$which.csv")")
    done ;;
  bwd | bwdruns)
    d=${DIMS:-256}
    # This build's gradients against the fp64 reference first, on odd lengths.
    for mask in none causal; do
      fj new run --head-dim "$d" --mask $mask --seq 1000 --batch 2 --heads 3 --backward > "$OUT/ab-bwd-verify-$mask.txt" 2>&1
      rows+=("verify d=$d s=1000 $mask (exit $?): $(grep -ciE 'fail|mismatch|nan' "$OUT/ab-bwd-verify-$mask.txt") lines naming a failure; $(grep -iE 'pass|ok' "$OUT/ab-bwd-verify-$mask.txt" | head -3 | tr '\n' ' ')")
    done
    for s in ${SEQS//,/ }; do
      for mask in none causal; do
        line="bwd d=$d s=$s $mask ms:"
        for which in old new; do
          ms=$(fj $which run --head-dim "$d" --mask $mask --seq "$s" --batch "$(tokens "$s")" --heads $((2048 / d)) --backward \
               --no-verify --reps 10 2>&1 | tee -a "$OUT/ab-bwd-runs.txt" | grep "ms backward (median)" | grep -oE "[0-9.]+ ms")
          line+=" $which ${ms:-?}"
        done
        rows+=("$line")
      done
    done
    [ $section = bwdruns ] && continue
    for which in old new; do
      peers=sdpa-flash; [ $which = new ] && peers=sdpa-flash,sdpa-cudnn
      FLASHJIT_LIB="$(lib_of $which)/libflashjit.so.0" FLASHJIT_CACHE_DIR=/tmp/fjc-bbench-$which \
        timeout 280 python3 bench/bench_backward.py --suite standard --dims "$d" --seqs "$SEQS" --backends flashjit,$peers \
        --out "$OUT/bwd-$which" > "$OUT/ab-bwd-$which.txt" 2>&1
      rows+=("bwd bench $which (case, bwd TFLOP/s, vs FA2, vs cuDNN):")
      while read -r l; do rows+=("  $l"); done < <(grep -E '^\| d=.* \| flashjit \|' "$OUT/ab-bwd-$which.txt" | awk -F'|' '{print $2, $5, $7, $8}')
    done ;;
  ncu)
    d=${DIMS:-256}
    for which in old new; do
      for mask in none causal; do
        LD_LIBRARY_PATH="$(lib_of $which):$LD_LIBRARY_PATH" FLASHJIT_CACHE_DIR=/tmp/fjc-ncu-$which timeout 150 \
          "$NCU" --clock-control none --metrics gpu__time_duration.sum --print-units base --csv $D/flashjit run --head-dim "$d" --mask $mask \
          --seq 4096 --batch 4 --heads $((2048 / d)) --backward --no-verify --reps 1 > "$OUT/ab-ncu-$which-$mask.csv" 2>&1
        rows+=("ncu $which d=$d 4k $mask: $(kernel_times "$OUT/ab-ncu-$which-$mask.csv")")
      done
    done ;;
  esac
done
echo "==================== summary (old: $(cat $D/old/COMMIT 2>/dev/null || echo "a library without a COMMIT file"))"
printf '%s\n' "${rows[@]}"
