# Sourced by the GPU-machine scripts (run from the repository root, .device/ carried): the
# bundle's libraries first on the loader path, and $OUT (default /tmp/flashjit-out) created.
D=.device
export LD_LIBRARY_PATH=$PWD/$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/flashjit-out}
mkdir -p "$OUT"
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
