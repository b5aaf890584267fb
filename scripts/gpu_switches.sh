#!/usr/bin/env bash
# Runs on the GPU machine from the repo root, with .device/ carried: one build measured under
# several environment settings, each in processes of its own, for an experiment switch (a
# docs/experiments patch built in) against the build as it is. SETTINGS lists them, `base` for no
# switch (default "base"), e.g. SETTINGS="base FJX_P64=2 FJX_P64=3"; a setting of several switches
# joins them with commas (FJX_QSTAGE=1,FJX_TMASTORE=1). Sections (any of):
#   checks  `flashjit run` against the fp64 reference on odd shapes at each of DIMS (default 64):
#           short and odd lengths, seq_q != seq_kv, GQA, a window, a block-map mask, and long ones
#           (one of odd length), so that small grids (split-KV) and large (persistent) both run;
#   tests   flashjit_tests "[forward]" and "[masks]" under each setting but base, all at once
#           (TEST_LIMIT seconds each, default 300);
#   sanitize  compute-sanitizer racecheck and memcheck on `flashjit run` at each of DIMS, causal,
#           seq 777 (an odd tile count), 2 x 12 heads: 168 tiles of 128 rows, more than the SMs,
#           so persistent CTAs walk a second tile through buffers the first reused; under each
#           setting but base, all at once (SANITIZE_LIMIT seconds each, default 240);
#   bench   bench.py's SUITES (default "standard masks") at DIMS, and SEQS where given (e.g.
#           1024,4096), flashjit only, ROUNDS (default 2) rounds alternating the settings, the
#           card's clock sampled per process.
# checks runs the settings side by side, one process each; tests and sanitize run every process
# at once (the card is shared: correctness only). Only bench times anything.
# Each setting gets its own FLASHJIT_CACHE_DIR (kernel and tuning caches apart). Logs under $OUT,
# named with the setting's '=' and ',' as '-' and '_' (the device tool returns no file whose name
# has an '=' or a '+'); a table is printed last.
set -u
source scripts/gpu_env.sh
export FLASHJIT_AUTOTUNE=off PYTHONUNBUFFERED=1
read -r -a settings <<< "${SETTINGS:-base}"
DIMS=${DIMS:-64}
rows=()
rm -f /tmp/switch-rows-*.txt  # an interrupted run's summary lines are not this run's
tag() { local t=${1//=/-}; echo "${t//,/_}"; }  # a setting as part of a file name
# "$@" with setting $1 exported (in a subshell: sampled is a shell function, which env cannot run).
with() {
  local s=$1; shift
  (if [ "$s" != base ]; then
     IFS=, read -r -a vars <<< "$s"
     export "${vars[@]}"
   fi
   FLASHJIT_CACHE_DIR=/tmp/fjc-switch-$(tag "$s")
   export FLASHJIT_CACHE_DIR
   "$@")
}
# The summary lines the background jobs of a section wrote, in file order, into rows.
collect() {
  local f
  for f in /tmp/switch-rows-*.txt; do
    [ -e "$f" ] || continue
    mapfile -t -O "${#rows[@]}" rows < "$f"
    rm -f "$f"
  done
}
checks=(
  "--mask none --seq 1000 --batch 2 --heads 3"
  "--mask causal --seq 777 --batch 2 --heads 3"
  "--mask causal --seq 17 --batch 3 --heads 2"
  "--mask none --seq-q 300 --seq-kv 1000 --batch 2 --heads 4"
  "--mask causal --seq 1000 --batch 2 --heads 8 --heads-kv 2"
  "--mask window(255,0) --seq 1000 --batch 2 --heads 3"
  "--mask causal&&document(doc) --tensor doc:i32:batch,seq_kv --seq 1000 --batch 2 --heads 3"
  "--mask causal --seq 4096 --batch 4 --heads 16"
  "--mask none --seq 2000 --batch 8 --heads 16"
)
for section in "$@"; do
  case $section in
  checks)
    for s in "${settings[@]}"; do
      (pass=0 fail=0 t=$(tag "$s")
       for d in ${DIMS//,/ }; do
         for c in "${checks[@]}"; do
           # shellcheck disable=SC2086  # each check is a list of words
           with "$s" $D/flashjit run --head-dim "$d" $c --reps 3 > "/tmp/switch-check-$t.txt" 2>&1
           rc=$?
           { echo "=== $s d=$d: $c (exit $rc)"; cat "/tmp/switch-check-$t.txt"; } >> "$OUT/checks-$t.txt"
           if [ $rc = 0 ] && grep -q '^verify *PASS' "/tmp/switch-check-$t.txt"; then pass=$((pass + 1)); else
             fail=$((fail + 1))
             echo "  FAIL $s d=$d $c (exit $rc): $(grep -E '^verify' "/tmp/switch-check-$t.txt" | cut -c1-120)" >> "/tmp/switch-rows-$t.txt"
           fi
         done
       done
       echo "checks $s: $pass passed, $fail failed" >> "/tmp/switch-rows-$t.txt") &
    done
    wait
    collect ;;
  tests)
    for s in "${settings[@]}"; do
      [ "$s" = base ] && continue
      for group in forward masks; do
        (t=$(tag "$s")-$group
         with "$s" timeout "${TEST_LIMIT:-300}" "$D"/flashjit_tests "[$group]" > "$OUT/tests-$t.txt" 2>&1
         rc=$?
         echo "tests $s [$group] (exit $rc): $(grep -E '^(All tests passed|test cases:)' "$OUT/tests-$t.txt" | tail -1)" \
           "| GPU cases PASS $(grep -c 'PASS' "$OUT/tests-$t.txt") FAIL $(grep -c 'FAIL' "$OUT/tests-$t.txt")" \
           > "/tmp/switch-rows-$t.txt") &
      done
    done
    wait
    collect ;;
  sanitize)
    for s in "${settings[@]}"; do
      [ "$s" = base ] && continue
      for d in ${DIMS//,/ }; do
        for tool in racecheck memcheck; do
          (t=$(tag "$s")-d$d-$tool
           extra=(); [ $tool = racecheck ] && extra=(--racecheck-report all)
           with "$s" timeout "${SANITIZE_LIMIT:-240}" "$CS" --tool $tool "${extra[@]}" --print-limit 20 "$D"/flashjit run --head-dim "$d" \
             --mask causal --seq 777 --batch 2 --heads 12 --reps 1 > "$OUT/sanitize-$t.txt" 2>&1
           rc=$?
           echo "$tool $s d=$d (exit $rc): $(grep -oE '(RACECHECK|ERROR) SUMMARY.*' "$OUT/sanitize-$t.txt" | tail -1)" \
             "| $(grep -E '^verify' "$OUT/sanitize-$t.txt" | cut -c1-60)" > "/tmp/switch-rows-$t.txt") &
        done
      done
    done
    wait
    collect ;;
  bench)
    for round in $(seq 1 "${ROUNDS:-2}"); do
      for s in "${settings[@]}"; do
        f=$(tag "$s")-$round
        log="$OUT/bench-$f.txt"
        # shellcheck disable=SC2086  # SUITES is a list of words
        with "$s" sampled "$OUT/smi-$f.csv" timeout 240 python3 bench/bench.py --suite ${SUITES:-standard masks} \
          --dims "$DIMS" ${SEQS:+--seqs "$SEQS"} --backends flashjit --out "$OUT/bench-$f" > "$log" 2>&1
        rows+=("bench $s r$round (exit $?): $(grep -E '^(standard|masks) ' "$log" |
          awk -F'|' '{n = split($1, a, " "); printf "%s:%s/%s=%s ", substr(a[1], 1, 1), a[2], a[5], $2 + 0}')")
        rows+=("  card: $(smi_summary "$OUT/smi-$f.csv")")
      done
    done ;;
  *) echo "gpu_switches.sh: unknown section '$section' (checks, tests, sanitize, bench)" >&2; exit 2 ;;
  esac
done
echo "==================== gpu_switches.sh (SETTINGS: ${settings[*]}, DIMS: $DIMS)"
printf '%s\n' "${rows[@]}"
