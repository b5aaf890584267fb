#!/usr/bin/env bash
# Builds here and copies what a GPU run needs into .device/ (git-ignored; the device tool's
# `carry`): the library with LLVM inside, libyaml-cpp, the CLI, the tests and the check script;
# with BASELINE=<commit>, also that commit's library for an A/B (scripts/gpu_ab.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
make build
rm -rf .device && mkdir -p .device
# The programs load the library by its SONAME, libflashjit.so.0: that is the one copy (~26 MB; a
# second under the link name would not fit the carry twice). The link name is a symlink for
# whoever opens libflashjit.so by path.
cp build/flashjit build/flashjit_tests build/flashjit_compile_bench .device/
cp "$(readlink -f build/libflashjit.so.0)" .device/libflashjit.so.0
ln -s libflashjit.so.0 .device/libflashjit.so
cp "$(readlink -f /usr/lib/x86_64-linux-gnu/libyaml-cpp.so.0.7)" .device/libyaml-cpp.so.0.7
strip --strip-unneeded .device/libflashjit.so.0 .device/flashjit .device/flashjit_tests .device/flashjit_compile_bench \
  .device/libyaml-cpp.so.0.7
# examples/embed's two programs, linked against this build and finding the library beside them.
g++ -std=c++17 -O2 -Iinclude examples/embed/embed.cpp -Lbuild -lflashjit -Wl,-rpath,'$ORIGIN' -o .device/embed_cpp
cc -std=c99 -O2 -Iinclude examples/embed/embed.c -Lbuild -lflashjit -ldl -Wl,-rpath,'$ORIGIN' -o .device/embed_c
strip .device/embed_cpp .device/embed_c
# What compute-sanitizer's racecheck makes of the hand-over patterns (scripts/gpu_racecheck_probe.sh).
cc -std=gnu11 -O2 scripts/racecheck_probe.c -ldl -o .device/racecheck_probe
cp scripts/gpu_check.sh .device/
# BASELINE=<commit>: that commit's library too, for scripts/gpu_ab.sh's "old" side. It is built in a
# worktree of its own (/tmp/flashjit-baseline, kept between bundles, so a second bundle against the
# same baseline rebuilds only what changed), stripped and xz'd to fit the carry beside this build's.
if [ -n "${BASELINE:-}" ]; then
  rev=$(git rev-parse --verify "$BASELINE^{commit}")
  wt=/tmp/flashjit-baseline
  git worktree prune  # a worktree whose folder is gone (a new machine's /tmp) would block the add
  if [ -d "$wt" ]; then git -C "$wt" checkout -q --detach "$rev"; else git worktree add -q --detach "$wt" "$rev"; fi
  cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build "$wt/build" -j "$(nproc)" --target flashjit
  mkdir -p .device/old
  strip --strip-unneeded -o .device/old/libflashjit.so.0 "$(readlink -f "$wt/build/libflashjit.so.0")"
  xz -T0 -3 -f .device/old/libflashjit.so.0
  echo "$rev $(git log -1 --format=%s "$rev")" > .device/old/COMMIT
fi
du -sh .device
