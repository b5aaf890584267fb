#!/usr/bin/env python3
"""Fails when libflashjit.so exports anything but the public API.

    tests/check_exports.py LIBRARY PUBLIC_HEADER_DIR

The public API is the C ABI (fj_*) and the classes and functions declared in the public headers
(include/flashjit/*.hpp): a dynamic symbol must be fj_*, or flashjit::[ref::]NAME... (or the
typeinfo/vtable of such a class) where NAME is a class, struct or function those headers declare
in namespace flashjit or flashjit::ref. Everything else — LLVM, yaml-cpp, libstdc++ template
instances, the library's private namespaces — must stay hidden.
"""
import os
import re
import subprocess
import sys


def public_names(header_dir):
    names = set()
    for name in os.listdir(header_dir):
        if not name.endswith(".hpp"):
            continue
        with open(os.path.join(header_dir, name), encoding="utf-8") as f:
            text = re.sub(r"//[^\n]*", "", f.read())
        names.update(re.findall(r"\b(?:class|struct)\s+(?:FLASHJIT_API\s+)?([A-Za-z_]\w*)\s*[:{]", text))
        for line in re.findall(r"FLASHJIT_API[^;{]*", text):
            m = re.search(r"([A-Za-z_]\w*)\s*\(", line)
            if m:
                names.add(m.group(1))
    return names


def main():
    lib, header_dir = sys.argv[1], sys.argv[2]
    allowed = public_names(header_dir)
    out = subprocess.run(["nm", "-D", "--defined-only", "-C", lib], capture_output=True, text=True, check=True).stdout
    pattern = re.compile(r"^flashjit::(?:ref::)?([A-Za-z_]\w*)(?:\[abi:\w+\])?(?:::|\(|$)")
    bad = []
    count = 0
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) < 3:
            continue
        symbol = parts[2]
        count += 1
        if symbol.startswith("fj_"):
            continue
        bare = re.sub(r"^(typeinfo name for|typeinfo for|vtable for|VTT for|non-virtual thunk to) ", "", symbol)
        m = pattern.match(bare)
        if m and m.group(1) in allowed and "::Impl" not in bare:
            continue
        bad.append(symbol)
    for s in bad:
        print("not public:", s)
    print(f"check_exports: {count} dynamic symbols, {len(bad)} outside the public API "
          f"({len(allowed)} public names in {header_dir})")
    return 1 if bad or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
