# Sourced by the GPU-machine scripts (run from the repository root, .device/ carried): the
# bundle's libraries first on the loader path, and $OUT (default /tmp/flashjit-out) created.
D=.device
export LD_LIBRARY_PATH=$PWD/$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/flashjit-out}
mkdir -p "$OUT"
# Nsight Compute's CLI, empty where the machine has none.
# shellcheck disable=SC2034  # read by the scripts that source this file
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
# compute-sanitizer's CLI (racecheck, memcheck).
# shellcheck disable=SC2034  # read by the scripts that source this file
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# Per kernel (the entry name's suffix) of an Nsight Compute CSV with gpu__time_duration: launches and
# the median duration in µs.
kernel_times() {
  grep gpu__time_duration "$1" | python3 -c '
import csv, sys, statistics
t = {}
for r in csv.reader(sys.stdin):
    name = r[4].split("(")[0].rsplit("_", 1)[-1] if len(r) > 4 else "?"
    t.setdefault(name, []).append(float(r[-1].replace(",", "")))
print(" ".join(f"{k}:{len(v)}x{statistics.median(v) / 1000:.1f}us" for k, v in t.items()))' 2>&1
}
# Runs "$@" while nvidia-smi samples the SM clock, power and temperature every 250 ms into the file
# $1 names; smi_summary FILE prints the loaded samples' (over 150 W) median clock and power, the
# lowest clock and the highest power and temperature. A kernel the card's power limit holds back
# gains less from a better schedule than a short run at full clock shows.
sampled() {
  local log=$1; shift
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 250 > "$log" 2>/dev/null &
  local pid=$! rc
  "$@"; rc=$?
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
  return $rc
}
smi_summary() {
  python3 - "$1" <<'PY'
import statistics, sys
rows = []
for line in open(sys.argv[1]):
    try:
        rows.append([float(x) for x in line.split(",")])
    except ValueError:
        pass
busy = [r for r in rows if r[1] > 150]
if not busy:
    print(f"no loaded samples ({len(rows)} in all)")
else:
    med = lambda i: statistics.median(r[i] for r in busy)
    print(f"{len(busy)} loaded samples: SM {med(0):.0f} MHz median, {min(r[0] for r in busy):.0f} lowest; "
          f"{med(1):.0f} W median, {max(r[1] for r in busy):.0f} W highest; {max(r[2] for r in busy):.0f} C highest")
PY
}
