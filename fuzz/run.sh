#!/usr/bin/env bash
# Builds the fuzz targets with clang (libFuzzer + ASan + UBSan) and runs each for a bounded time
# with a fixed seed over the checked-in corpus: expr and spec (the DSL front end), tuning (the
# tuning cache's file and import readers) and kernel_entry (the compile cache's entry decoder). Exit 0 = no crash, hang,
# leak or sanitizer report. Usage: fuzz/run.sh [BUILD_DIR]   (FUZZ_SECONDS=N to change
# the time per target; default 15). Needs Debian packages clang-14, libclang-rt-14-dev and
# llvm-19-dev (the front end writes JSON with LLVM Support, linked statically).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-${ROOT}/build-fuzz}"
SECONDS_PER_TARGET="${FUZZ_SECONDS:-15}"
TARGETS=(expr spec tuning kernel_entry)

CXX=""
for c in clang++-14 clang++; do
  if command -v "$c" >/dev/null 2>&1; then CXX="$c"; break; fi
done
if [[ -z "$CXX" ]]; then
  echo "fuzz/run.sh: clang++ not found; install the Debian package clang-14 (apt-get install clang-14)" >&2
  exit 1
fi
YAML_A=/usr/lib/x86_64-linux-gnu/libyaml-cpp.a
[[ -f "$YAML_A" ]] || YAML_A="$(find /usr/lib /usr/local/lib -name libyaml-cpp.a 2>/dev/null | head -n1)"
if [[ -z "$YAML_A" || ! -f "$YAML_A" ]]; then
  echo "fuzz/run.sh: libyaml-cpp.a not found; install the Debian package libyaml-cpp-dev" >&2
  exit 1
fi
LLVM_CONFIG="$(command -v llvm-config-19 || echo /usr/lib/llvm-19/bin/llvm-config)"
if [[ ! -x "$LLVM_CONFIG" ]]; then
  echo "fuzz/run.sh: llvm-config-19 not found; install the Debian package llvm-19-dev" >&2
  exit 1
fi
read -r -a LLVM_SUPPORT <<< "$("$LLVM_CONFIG" --link-static --libfiles support)"

mkdir -p "$BUILD/obj"
# libFuzzer's runtime ships in libclang-rt-14-dev; probe it with a trivial target first so
# a missing package is named instead of showing up as a link error.
PROBE="$BUILD/probe.cpp"
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' > "$PROBE"
if ! "$CXX" -fsanitize=fuzzer,address,undefined "$PROBE" -o "$BUILD/probe" 2> "$BUILD/probe.log"; then
  cat "$BUILD/probe.log" >&2
  echo "fuzz/run.sh: $CXX cannot link libFuzzer/ASan/UBSan; install the Debian package libclang-rt-14-dev" >&2
  exit 1
fi

FLAGS=(-std=c++20 -O1 -g -fno-omit-frame-pointer -I"$ROOT" -I"$ROOT/include" -isystem "$("$LLVM_CONFIG" --includedir)"
       -fsanitize=address,undefined -fno-sanitize-recover=undefined)
SOURCES=("$ROOT"/compiler/dsl/*.cpp "$ROOT"/autotune/tuning_yaml.cpp "$ROOT"/autotune/tuning_key.cpp
         "$ROOT"/autotune/kernel_entry.cpp "$ROOT"/support/hash.cpp)

# Rebuild an object only when its source or any header it may include is newer (the build dir persists).
newest_header="$(ls -t "$ROOT"/compiler/dsl/*.hpp "$ROOT"/autotune/*.hpp "$ROOT"/support/*.hpp "$ROOT"/include/flashjit/*.hpp | head -n1)"
OBJS=()
for src in "${SOURCES[@]}"; do
  obj="$BUILD/obj/$(basename "${src%.cpp}").o"
  if [[ ! -f "$obj" || "$src" -nt "$obj" || "$newest_header" -nt "$obj" ]]; then
    echo "fuzz/run.sh: compiling $(basename "$src")"
    "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
  fi
  OBJS+=("$obj")
done

status=0
for t in "${TARGETS[@]}"; do
  bin="$BUILD/fuzz_$t"
  src="$ROOT/fuzz/fuzz_$t.cpp"
  if [[ ! -x "$bin" || "$src" -nt "$bin" || -n "$(find "${OBJS[@]}" -newer "$bin" 2>/dev/null)" ]]; then
    echo "fuzz/run.sh: linking fuzz_$t"
    "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer "$src" "${OBJS[@]}" "$YAML_A" "${LLVM_SUPPORT[@]}" -lz -lzstd -ldl -lpthread \
      -o "$bin"
  fi
  # New inputs go to a scratch corpus; the checked-in one is only read.
  work="$BUILD/corpus_$t"
  rm -rf "$work"
  mkdir -p "$work"
  echo "fuzz/run.sh: fuzzing $t for ${SECONDS_PER_TARGET}s (seed 1)"
  if ! ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
       "$bin" -seed=1 -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
              -print_final_stats=1 -artifact_prefix="$BUILD/crash_${t}_" \
              "$work" "$ROOT/fuzz/corpus/$t" > "$BUILD/fuzz_$t.log" 2>&1; then
    tail -n 60 "$BUILD/fuzz_$t.log" >&2
    echo "fuzz/run.sh: fuzz_$t FAILED; reproducer(s): $(ls "$BUILD"/crash_"${t}"_* 2>/dev/null | tr '\n' ' ')" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|Done" "$BUILD/fuzz_$t.log" | tail -n 2
  fi
done
exit $status
