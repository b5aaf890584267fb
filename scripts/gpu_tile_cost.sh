#!/usr/bin/env bash
# Runs on the GPU machine from the repo root, with .device/ carried: what a query tile costs besides
# its key tiles, flashjit beside the PyTorch SDPA peers (cuDNN, FlashAttention-2), non-causal, bf16,
# 2048/d heads. Sections (any of, default "sweep ncu"):
#   sweep  at each of DIMS (default "64 128 256"), medians of timed launches over two sweeps:
#          seq_q 1024, batch 16, seq_kv 1024..16384 (the query tiles stay, each walks more keys:
#          time = tiles x (X + n c) / SMs gives X, the fixed cost, in key tiles c); seq 1024 with
#          batch 16, 32, 64 (more tiles of the same walk: the launch's own ramp and tail);
#   ncu    Nsight Compute on d = 128, seq_q 1024 with 1024 and 16384 keys, both kernels: SM active
#          cycles against elapsed (idle SMs at the ramp and tail) and their spread, instructions;
#   sass   flashjit's kernel at SASS_DIM (default 128) with 1024 and 16384 keys and cuDNN's at
#          1024, per SASS instruction: executions and warp-stall samples (one tar.xz; an
#          instruction's count at the two lengths splits it into per-tile and per-key-tile parts);
#   l2     L2 traffic and throughput, DRAM reads, SM throughput, both kernels, at d = 64 (16k; 1k
#          queries on 16k keys; 4k) and d = 128 (16k).
# Logs in $OUT/tile-cost-*; a table is printed last.
set -u
source scripts/gpu_env.sh
export FLASHJIT_AUTOTUNE=off FLASHJIT_CACHE_DIR=/tmp/fjc-tile-cost PYTHONUNBUFFERED=1
DIMS=${DIMS:-64 128 256}
KVS=${KVS:-1024 2048 4096 8192 16384}
BATCHES=${BATCHES:-16 32 64}
rows=()
fj_ms() {  # head dim, seq_q, seq_kv, batch: flashjit's median ms (verified on the first point only)
  local verify=--no-verify; [ "$2" = "$3" ] && [ "$4" = 16 ] && verify=
  local out; out=$(timeout 60 "$D/flashjit" run --head-dim "$1" --mask none --seq-q "$2" --seq-kv "$3" --batch "$4" \
    --heads $((2048 / $1)) --reps 30 $verify 2>&1)
  { echo "=== d=$1 seq_q=$2 seq_kv=$3 batch=$4"; echo "$out"; } >> "$OUT/tile-cost-runs.txt"
  local v; v=$(grep -oE '^verify +(PASS|FAIL)' <<< "$out" | awk '{print $2}')
  echo "$(grep -oE '^time +[0-9.]+' <<< "$out" | awk '{print $2}')${v:+($v)}"
}
# The peers: `sweep DIMS KVS BATCHES` prints median ms (cuda events, 30 calls after 5, each call
# synchronised, so the host's share is in it); `once BACKEND D SEQ_Q SEQ_KV BATCH` calls once, for
# Nsight Compute.
cat > /tmp/tile_cost_peers.py <<'PY'
import statistics, sys, torch
from torch.nn.attention import sdpa_kernel, SDPBackend
from torch.nn.functional import scaled_dot_product_attention as sdpa
backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "fa2": SDPBackend.FLASH_ATTENTION}
def ms(b, d, sq, skv, batch, reps=30):
    h = 2048 // d
    q = torch.randn(batch, h, sq, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(batch, h, skv, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    with sdpa_kernel(backends[b]):
        for _ in range(5 if reps > 1 else 0):
            sdpa(q, k, v)
        torch.cuda.synchronize()
        t = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); sdpa(q, k, v); e.record(); e.synchronize()
            t.append(s.elapsed_time(e))
    return statistics.median(t)
if sys.argv[1] == "once":
    ms(sys.argv[2], *map(int, sys.argv[3:7]), reps=1)
    sys.exit(0)
dims, kvs, batches = [list(map(int, a.split())) for a in sys.argv[2:5]]
for b in backends:
    for d in dims:
        for skv in kvs:
            try: print(f"{b} d={d} kv {skv}: {ms(b, d, 1024, skv, 16):.4f}")
            except Exception as e: print(f"{b} d={d} kv {skv}: error {str(e)[:80]}")
        for batch in batches[1:]:
            try: print(f"{b} d={d} batch {batch}: {ms(b, d, 1024, 1024, batch):.4f}")
            except Exception as e: print(f"{b} d={d} batch {batch}: error {str(e)[:80]}")
PY
# Nsight Compute with metrics $1 on d=$2, seq_q $3, seq_kv $4, batch $5: flashjit's kernel, then
# cuDNN's (the first launch of each).
ncu_both() {
  local m=$1; shift
  timeout 120 "$NCU" --clock-control none --metrics "$m" --csv -k regex:flashjit_fwd -c 1 "$D/flashjit" run --head-dim "$1" \
    --mask none --seq-q "$2" --seq-kv "$3" --batch "$4" --heads $((2048 / $1)) --reps 1 --no-verify > /tmp/tc-a.csv 2>&1
  timeout 120 "$NCU" --clock-control none --metrics "$m" --csv -k regex:'flash|fprop|fmha' -c 1 \
    python3 /tmp/tile_cost_peers.py once cudnn "$@" > /tmp/tc-b.csv 2>&1
  cat /tmp/tc-a.csv /tmp/tc-b.csv >> "$OUT/tile-cost-ncu.csv"
  for w in flashjit:tc-a cudnn:tc-b; do
    rows+=("ncu ${w%%:*} d=$1 ${2}x$3 b$4: $(grep -E '^"[0-9]' "/tmp/${w#*:}.csv" | awk -F'","' '{print $(NF-2) "=" $NF}' | tr -d '"' | tr '\n' ' ')")
  done
}
sections=("$@"); [ ${#sections[@]} -gt 0 ] || sections=(sweep ncu)
if [ -z "$NCU" ] && [[ " ${sections[*]} " =~ \ (ncu|sass|l2)\  ]]; then
  echo "gpu_tile_cost.sh: no ncu (Nsight Compute) on this machine for ${sections[*]}" >&2; exit 2
fi
for section in "${sections[@]}"; do
  case $section in
  sweep)
    for d in $DIMS; do
      line="flashjit d=$d kv:"
      for kv in $KVS; do line+=" $kv=$(fj_ms "$d" 1024 "$kv" 16)"; done
      line+="  batch:"
      for b in $BATCHES; do line+=" $b=$(fj_ms "$d" 1024 1024 "$b")"; done
      rows+=("$line")
    done
    timeout 240 python3 /tmp/tile_cost_peers.py sweep "$DIMS" "$KVS" "$BATCHES" > "$OUT/tile-cost-peers.txt" 2>&1
    while read -r l; do rows+=("$l"); done < <(grep -E '^(cudnn|fa2) ' "$OUT/tile-cost-peers.txt") ;;
  ncu)
    M=gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_active.min,sm__cycles_active.max,sm__cycles_elapsed.avg
    for kv in 1024 16384; do ncu_both "$M,smsp__inst_executed.sum" 128 1024 $kv 16; done ;;
  sass)
    S=(--section SourceCounters --section WarpStateStats --section SpeedOfLight)
    sd=${SASS_DIM:-128}
    for kv in 1024 16384; do
      timeout 150 "$NCU" --clock-control none "${S[@]}" -k regex:flashjit_fwd -c 1 -f -o /tmp/tc-fj-$kv "$D/flashjit" run \
        --head-dim "$sd" --mask none --seq-q 1024 --seq-kv $kv --batch 16 --heads $((2048 / sd)) --reps 1 --no-verify > /dev/null 2>&1
      "$NCU" --import /tmp/tc-fj-$kv.ncu-rep --page source --csv --print-source sass > /tmp/sass-fj-$kv.csv
    done
    timeout 150 "$NCU" --clock-control none "${S[@]}" -k regex:'flash|fprop|fmha' -c 1 -f -o /tmp/tc-cudnn-1024 \
      python3 /tmp/tile_cost_peers.py once cudnn "$sd" 1024 1024 16 > /dev/null 2>&1
    "$NCU" --import /tmp/tc-cudnn-1024.ncu-rep --page source --csv --print-source sass > /tmp/sass-cudnn-1024.csv
    (cd /tmp && tar cJf "$OUT/tile-cost-sass-d$sd.tar.xz" sass-fj-1024.csv sass-fj-16384.csv sass-cudnn-1024.csv)
    rows+=("sass d=$sd: $(stat -c %s "$OUT/tile-cost-sass-d$sd.tar.xz") bytes in tile-cost-sass-d$sd.tar.xz") ;;
  l2)
    M=gpu__time_duration.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,lts__t_sector_hit_rate.pct
    M+=,dram__bytes_read.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__registers_per_thread
    for shape in "64 16384 16384 1" "64 1024 16384 16" "64 4096 4096 4" "128 16384 16384 1"; do
      # shellcheck disable=SC2086  # four words
      ncu_both "$M" $shape
    done ;;
  *) echo "gpu_tile_cost.sh: unknown section '$section' (sweep, ncu, sass, l2)" >&2; exit 2 ;;
  esac
done
echo "==================== gpu_tile_cost.sh (ms; DIMS $DIMS)"
printf '%s\n' "${rows[@]}"
