#!/usr/bin/env bash
# SASS of a kernel on the build machine, which has ptxas but no disassembler:
#   scripts/sass.sh KERNEL.ptx|KERNEL.cubin [nvdisasm options...]   e.g. -plr -lrm count (live registers)
# A .ptx is assembled first (ptxas -arch=sm_90a, as the runtime does). The disassembler is CUDA
# 11.8's nvdisasm from Debian's non-free nvidia-cuda-toolkit package, fetched once (apt-get
# download, no install) into $SASS_TOOLS (default ~/.cache/flashjit-sass). It refuses ptxas 13's
# cubins for their ELF header (ABI version 8); a copy whose header says ABI 7 and EF_CUDA_SM90 reads
# correctly, sm_90's instruction encoding being the same. For reading only: the GPU machine's own
# nvdisasm stays the reference.
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,3p "$0" >&2; exit 2; }
in=$1; shift
tools=${SASS_TOOLS:-$HOME/.cache/flashjit-sass}
nvdisasm=$tools/usr/bin/nvdisasm
if [ ! -x "$nvdisasm" ]; then
  mkdir -p "$tools/apt/lists/partial"
  printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: non-free\n' \
    > "$tools/apt/non-free.sources"
  apt=(-o Dir::Etc::sourcelist=/dev/null -o "Dir::Etc::sourceparts=$tools/apt" -o "Dir::State::Lists=$tools/apt/lists")
  apt-get "${apt[@]}" update -qq
  (cd "$tools" && apt-get "${apt[@]}" download nvidia-cuda-toolkit 2>/dev/null)
  dpkg -x "$tools"/nvidia-cuda-toolkit_*.deb "$tools"
  rm -f "$tools"/nvidia-cuda-toolkit_*.deb
fi
ptxas=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cubin=$in
if [[ $in == *.ptx ]]; then
  "$ptxas" -arch=sm_90a "$in" -o "$tmp/in.cubin"
  cubin=$tmp/in.cubin
fi
python3 - "$cubin" "$tmp/patched.cubin" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
b[7], b[8] = 0x33, 7                         # EI_OSABI: CUDA; EI_ABIVERSION 7
struct.pack_into("<I", b, 0x30, 0x5A055A)    # e_flags: sm_90, virtual sm_90, 64-bit, unified textures
open(sys.argv[2], "wb").write(b)
PY
"$nvdisasm" -c "$@" "$tmp/patched.cubin"
