#!/usr/bin/env bash
# Runs on the GPU machine from the repo root, with .device/ carried: the backward with dK and dV on
# the two warpgroups of one launch (FLASHJIT_BWD_WARPGROUPS=on, config 32,64,8,STAGES;
# docs/perf-notes.md §25) against the fp64 reference over head dims, masks, scores, GQA and odd
# lengths; then its time beside the heuristic's split form at the standard d=256 shapes (16k
# tokens, hidden 2048). Full logs in $OUT/bwd-wg-*.txt; a table is printed last.
set -u
source scripts/gpu_env.sh
export FLASHJIT_AUTOTUNE=off
V="$OUT/bwd-wg-verify.txt" T="$OUT/bwd-wg-time.txt"
: > "$V"; : > "$T"
verify() {  # label, then flashjit run arguments
  local label=$1; shift
  local out; out=$(FLASHJIT_BWD_WARPGROUPS=on $D/flashjit run "$@" --backward --reps 2 2>&1); local rc=$?
  { echo "=== $label: $*"; echo "$out"; echo "exit $rc"; } >> "$V"
  # The backward's lines: "backward KEY DESCRIPTION (why)", then its "verify   PASS|FAIL ...".
  local verdict; verdict=$(echo "$out" | grep -A1 "^backward " | grep "^verify" | awk '{print $2, $3}')
  local form; form=$(echo "$out" | grep "^backward " | grep -q "dK,dV by warpgroup" && echo warpgroups || echo OTHER)
  printf '%-34s exit %-3s %-10s %s\n' "$label" "$rc" "$form" "${verdict:-no verdict}"
}
for st in 2 1; do
  for d in 256 160; do
    for mask in none causal; do
      verify "d=$d $mask s$st" --head-dim $d --mask $mask --seq 1000 --batch 2 --heads 4 --backward-config 32,64,8,$st
    done
  done
done
C="--backward-config 32,64,8,2"
verify "d=192/128 causal 113" --head-dim 192 --head-dim-v 128 --mask causal --seq 113 --batch 3 --heads 2 $C
verify "d=256 fp16 window 1023" --dtype fp16 --head-dim 256 --mask "window(256, 0)" --seq 1023 --batch 1 --heads 4 $C
verify "d=256 softcap causal" --head-dim 256 --mask causal --score "30 * tanh(score / 30)" --seq 1000 --batch 1 --heads 4 $C
verify "d=256 alibi" --head-dim 256 --score "score + slope * (kv - q)" --param slope:f32=0.01 --seq 1000 --batch 1 --heads 4 $C
verify "d=256 document" --head-dim 256 --mask "document(doc)" --tensor doc:i32:seq_kv --seq 1000 --batch 1 --heads 4 $C
verify "d=256 GQA 8:1 causal_br" --head-dim 256 --mask causal_br --seq-q 700 --seq-kv 1000 --heads 8 --heads-kv 1 --batch 1 $C
verify "d=256 empty rows" --head-dim 256 --mask "kv < q - 2000" --seq 1000 --batch 1 --heads 2 $C
echo "--- time (ms of the backward, median), heuristic split vs warpgroups"
for sb in "1024 16" "4096 4" "16384 1"; do
  set -- $sb
  for mask in none causal; do
    a=$($D/flashjit run --head-dim 256 --mask $mask --seq $1 --batch $2 --heads 16 --backward --no-verify --reps 10 2>&1 | tee -a "$T" | grep "ms backward (median)" | grep -oE "[0-9.]+ ms")
    b=$(FLASHJIT_BWD_WARPGROUPS=on $D/flashjit run --head-dim 256 --mask $mask --seq $1 --batch $2 --heads 16 --backward --no-verify --reps 10 $C 2>&1 | tee -a "$T" | grep "ms backward (median)" | grep -oE "[0-9.]+ ms")
    printf 'd=256 seq=%-6s %-7s split %-12s warpgroups %s\n' "$1" "$mask" "$a" "$b"
  done
done
