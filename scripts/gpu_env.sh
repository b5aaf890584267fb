# Sourced by the GPU-machine scripts (run from the repository root, .device/ carried): the
# bundle's libraries first on the loader path, and $OUT (default /tmp/flashjit-out) created.
D=.device
export LD_LIBRARY_PATH=$PWD/$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/flashjit-out}
mkdir -p "$OUT"
