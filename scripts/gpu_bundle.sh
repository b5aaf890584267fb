#!/usr/bin/env bash
# Builds here and copies what a GPU run needs into .device/ (git-ignored; the device tool's
# `carry`): the library with LLVM inside, libyaml-cpp, the CLI, the tests and the check script.
set -euo pipefail
cd "$(dirname "$0")/.."
make build
rm -rf .device && mkdir -p .device
cp build/libflashjit.so build/flashjit build/flashjit_tests build/flashjit_compile_bench .device/
cp "$(readlink -f /usr/lib/x86_64-linux-gnu/libyaml-cpp.so.0.7)" .device/libyaml-cpp.so.0.7
strip --strip-unneeded .device/libflashjit.so .device/flashjit .device/flashjit_tests .device/flashjit_compile_bench \
  .device/libyaml-cpp.so.0.7
cp scripts/gpu_check.sh .device/
du -sh .device
