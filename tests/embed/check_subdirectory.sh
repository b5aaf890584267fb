#!/usr/bin/env bash
# Configures examples/embed with flashjit as a sub-project (add_subdirectory of this checkout, as
# FetchContent does) and checks what a sub-project must not do: build its tests (and need Catch2),
# or set the parent's build type. Building the example then needs all of libflashjit.so (minutes
# on a small machine), so by default only the example's own object is compiled, against the
# flashjit::flashjit target's include directories; FLASHJIT_EMBED_FULL=1 builds and runs it all.
#   tests/embed/check_subdirectory.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/flashjit-subdir.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check_subdirectory: FAIL: $*" >&2; exit 1; }

cmake -S "$src/examples/embed" -B "$tmp/b" -G "Unix Makefiles" -DFLASHJIT_SOURCE_DIR="$src" >/dev/null
grep -q '^FLASHJIT_BUILD_TESTS:BOOL=OFF' "$tmp/b/CMakeCache.txt" || fail "FLASHJIT_BUILD_TESTS is not OFF in a sub-project"
grep -q '^CMAKE_BUILD_TYPE:STRING=$' "$tmp/b/CMakeCache.txt" || fail "the sub-project set the parent's CMAKE_BUILD_TYPE"
targets=$(cmake --build "$tmp/b" --target help)
echo "$targets" | grep -q "flashjit_tests\|Catch" && fail "a sub-project defines flashjit's test targets"
echo "$targets" | grep -q "embed_cpp" || fail "no embed_cpp target"
if [ "${FLASHJIT_EMBED_FULL:-0}" = 1 ]; then
  cmake --build "$tmp/b" -j "$(nproc)" >/dev/null
  "$tmp/b/embed_cpp"
else
  make -C "$tmp/b" embed.o >/dev/null
  [ -s "$tmp/b/CMakeFiles/embed_cpp.dir/embed.cpp.o" ] || fail "embed.cpp was not compiled"
fi
echo "check_subdirectory: ok"
