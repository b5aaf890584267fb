# How much of ptxas's run is its start-up on this host, and how much of it an early start hides
# (support/ptxas.hpp's Job): each PTX file goes to a fresh ptxas through a pipe, handed over at once
# and 200 ms after the process started, with the input named "-" and "/dev/stdin" (ptxas reads "-"
# before it initialises). Median of six each; docs/perf-notes.md §56 has the hosts' figures.
#   python3 bench/ptxas_startup.py KERNEL.ptx ...   (PTX for sm_90a, as `flashjit compile` writes it;
#                                                    ptxas from PATH, else /usr/local/cuda/bin)
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
with tempfile.TemporaryDirectory() as tmp:
    for path in sys.argv[1:]:
        src = open(path, "rb").read()
        for name in ("-", "/dev/stdin"):
            ms = {0.0: [], 0.2: []}
            for _ in range(6):
                for delay in ms:
                    p = subprocess.Popen([ptxas, "-arch=sm_90a", name, "-o", tmp + "/k.cubin"], stdin=subprocess.PIPE)
                    time.sleep(delay)
                    t = time.time()
                    p.stdin.write(src)
                    p.stdin.close()
                    if p.wait() != 0:
                        sys.exit(f"ptxas failed on {path}")
                    ms[delay].append((time.time() - t) * 1000)
            print(f"{path} as {name}: handed over at once {statistics.median(ms[0.0]):.1f} ms, "
                  f"200 ms after the start {statistics.median(ms[0.2]):.1f} ms")
