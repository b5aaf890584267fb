#!/usr/bin/env bash
# The whole head-dim grid for the heuristic table: every {qk, v} from 8 to 256 in steps of 8, each
# arch, causal with a softcap score (the codegen matrix's heaviest), compiled with the heuristic's
# config by `flashjit compile` (which runs ptxas -v) and every spill listed. Exit 0 when none spills.
# About 1024 compiles per arch (a few seconds each): hours on a small CPU, so it is a script, and
# tests/test_heuristic_spills.cpp checks a fixed sample in CTest.
# Usage: scripts/heuristic_spill_grid.sh [BUILD_DIR] [ARCH...]   (default: build, sm_80 sm_90a)
# JOBS=N compiles in parallel (default: nproc).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
shift || true
ARCHS=("$@")
[[ ${#ARCHS[@]} -gt 0 ]] || ARCHS=(sm_80 sm_90a)
CLI="$BUILD/flashjit"
[[ -x "$CLI" ]] || { echo "heuristic_spill_grid.sh: $CLI not found; build first" >&2; exit 1; }
command -v ptxas >/dev/null || [[ -x /usr/local/cuda/bin/ptxas ]] || {
  echo "heuristic_spill_grid.sh: ptxas not found (CUDA toolkit)" >&2; exit 1; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

one() {  # ARCH QK V: one line "ARCH qk v config: ptxas summary"
  local dir="$WORK/$1-$2-$3"
  mkdir -p "$dir"
  printf 'dtype: bf16\nhead_dim: {qk: %d, v: %d}\nmask: causal\nscore: 30 * tanh(score / 30)\n' "$2" "$3" > "$dir/s.yaml"
  local summary
  summary="$("$CLI" compile "$dir/s.yaml" --arch "$1" -o "$dir/k.ptx" 2>&1 >/dev/null | tail -n 1)"
  echo "$1 $2 $3 ${summary#*config }"
  rm -rf "$dir"
}
export -f one
export CLI WORK

for arch in "${ARCHS[@]}"; do
  for qk in $(seq 8 8 256); do
    for v in $(seq 8 8 256); do echo "$arch $qk $v"; done
  done
done | xargs -P "${JOBS:-$(nproc)}" -n 3 bash -c 'one "$0" "$1" "$2"' > "$WORK/results.txt"

sort -k1,1 -k2n -k3n "$WORK/results.txt" > "$WORK/sorted.txt"
total=$(wc -l < "$WORK/sorted.txt")
bad=$(grep -Ev ' 0 B spill stores, 0 B spill loads' "$WORK/sorted.txt" || true)
if [[ -n "$bad" ]]; then
  echo "$bad"
  echo "heuristic_spill_grid.sh: $(printf '%s\n' "$bad" | wc -l) of $total kernels spill or failed" >&2
  exit 1
fi
echo "heuristic_spill_grid.sh: $total kernels (${ARCHS[*]}), none spills"
