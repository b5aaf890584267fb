#!/usr/bin/env bash
# Packs a built flashjit as `make deb` does (CPack, DEB), installs it with `dpkg -i` into an empty
# root of its own (dpkg --root; the system is left alone, and --force-depends since that root has
# no other packages) and checks that it installs the same tree as `cmake --install` under /usr,
# that its `flashjit info` runs from there (exit 0, or 69 without a GPU), and that every library
# its programs load comes from itself or from a package it names in Depends.
#   tests/embed/check_deb.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/flashjit-deb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check_deb: FAIL: $*" >&2; exit 1; }

(cd "$tmp" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >/dev/null)
deb=$(ls "$tmp"/pkg/flashjit_*.deb) || fail "cpack made no .deb"
mkdir -p "$tmp/root/var/lib/dpkg/info" "$tmp/root/var/lib/dpkg/updates"
touch "$tmp/root/var/lib/dpkg/status"
dpkg --root="$tmp/root" --force-depends --force-not-root -i "$deb" >/dev/null 2>&1 || fail "dpkg -i of $deb failed"
dpkg --root="$tmp/root" -s flashjit | grep -q "^Status: install ok installed" || fail "dpkg does not list flashjit installed"
rm -rf "$tmp/root/var"
cmake --install "$build" --prefix "$tmp/tree/usr" >/dev/null
diff <(cd "$tmp/root" && find . | sort) <(cd "$tmp/tree" && find . | sort) || fail "the package's tree is not the installed tree"

rc=0
out=$("$tmp/root/usr/bin/flashjit" info 2>&1) || rc=$?
[ "$rc" = 0 ] || [ "$rc" = 69 ] || fail "flashjit info from the package exited $rc: $out"
echo "$out" | grep -q "^flashjit $(dpkg-deb -f "$deb" Version)$" || fail "flashjit info does not print the package's version: $out"

# Every DT_NEEDED library is in the package or in a package named in Depends.
depends=$(dpkg-deb -f "$deb" Depends)
for elf in "$tmp/root/usr/bin/flashjit" "$tmp"/root/usr/lib/libflashjit.so.*.*; do
  for lib in $(readelf -d "$elf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    [ -e "$tmp/root/usr/lib/$lib" ] && continue
    # awk reads to the end (no `exit`): under pipefail, ldconfig killed by SIGPIPE would end the script.
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ && p == "" {p = $NF} END {print p}')
    [ -n "$path" ] || fail "$(basename "$elf") needs $lib, which is not installed here"
    pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null || dpkg -S "$path" | awk 'NR == 1')
    pkg=${pkg%%:*}
    echo ", $depends," | grep -q ", $pkg[ ,(]" || fail "$(basename "$elf") needs $lib from $pkg, which Depends ($depends) lacks"
  done
done
echo "check_deb: ok ($(basename "$deb"); Depends: $depends)"
