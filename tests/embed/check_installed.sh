#!/usr/bin/env bash
# Installs a built flashjit to a temporary prefix, moves the prefix (the package must be
# relocatable), and builds and runs examples/embed against it alone: the C++ program through
# find_package(flashjit), the C program through pkg-config. Without a GPU both take their
# "compiled only" path and exit 0. Also checks that the installed package leaks nothing of LLVM or
# yaml-cpp to a consumer.
#   tests/embed/check_installed.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/flashjit-installed.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check_installed: FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/staged" >/dev/null
mv "$tmp/staged" "$tmp/prefix"
p=$tmp/prefix
for f in lib/libflashjit.so lib/libflashjit.so.0 include/flashjit/flashjit.h include/flashjit/flashjit.hpp \
         include/flashjit/version.h bin/flashjit lib/cmake/flashjit/flashjitConfig.cmake \
         lib/cmake/flashjit/flashjitConfigVersion.cmake lib/cmake/flashjit/flashjitTargets.cmake \
         lib/pkgconfig/flashjit.pc; do
  [ -e "$p/$f" ] || fail "the install tree lacks $f"
done
readelf -d "$p/lib/libflashjit.so" | grep -q 'SONAME.*\[libflashjit\.so\.0\]' || fail "SONAME is not libflashjit.so.0"
# LLVM is inside the library: a consumer links libflashjit.so alone and needs no LLVM package.
if readelf -d "$p/lib/libflashjit.so" | grep NEEDED | grep -i llvm; then fail "libflashjit.so needs an LLVM library"; fi
if grep -n "INTERFACE_LINK_LIBRARIES\|llvm\|yaml" "$p"/lib/cmake/flashjit/flashjitTargets*.cmake; then
  fail "the exported target passes link dependencies (or LLVM/yaml-cpp paths) on to consumers"
fi
if grep -rln "llvm/\|yaml-cpp\|cuda.h" "$p/include"; then fail "an installed header includes LLVM, yaml-cpp or CUDA"; fi
"$p/bin/flashjit" --version | grep -q "^flashjit 0\." || fail "the installed CLI does not run"

# C++ through find_package (nothing but the prefix on the search path).
cmake -S "$src/examples/embed" -B "$tmp/cpp" -DCMAKE_PREFIX_PATH="$p" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/cpp" >/dev/null
out=$("$tmp/cpp/embed_cpp") || fail "embed_cpp exited $?: $out"
echo "embed_cpp: $out"
echo "$out" | grep -q "compiled only\|ran on" || fail "embed_cpp printed neither 'compiled only' nor 'ran on'"

# C through pkg-config, as strict C99.
export PKG_CONFIG_PATH=$p/lib/pkgconfig
[ "$(pkg-config --modversion flashjit)" = "$(sed -n 's/^#define FLASHJIT_VERSION_\(MAJOR\|MINOR\|PATCH\) //p' \
   "$src/include/flashjit/version.h" | paste -sd.)" ] || fail "flashjit.pc's version is not version.h's"
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -Werror -pedantic -o "$tmp/embed_c" "$src/examples/embed/embed.c" \
   $(pkg-config --cflags --libs flashjit) -Wl,-rpath,"$(pkg-config --variable=libdir flashjit)" -ldl
out=$("$tmp/embed_c") || fail "embed_c exited $?: $out"
echo "embed_c: $out"
echo "$out" | grep -q "compiled only\|ran on" || fail "embed_c printed neither 'compiled only' nor 'ran on'"
echo "check_installed: ok"
