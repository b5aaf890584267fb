#!/usr/bin/env bash
# Runs on the GPU machine from the repo root, with .device/ carried (scripts/gpu_bundle.sh builds
# .device/racecheck_probe): each hand-over pattern of scripts/racecheck_probe.c plainly and under
# compute-sanitizer's racecheck, so that a racecheck report on a warp-specialised kernel can be
# told apart from what the tool makes of a correct pattern. Logs to $OUT/racecheck-probe.txt; a
# table (variant, sum, racecheck summary) is printed last.
set -u
source scripts/gpu_env.sh
L="$OUT/racecheck-probe.txt"
: > "$L"
rows=()
for v in arrive_sync sync_sync mbarrier racy; do
  plain=$($D/racecheck_probe "$v" 2>&1)
  echo "--- $v: $plain" >> "$L"
  checked=$("$CS" --tool racecheck --racecheck-report all --print-limit 20 $D/racecheck_probe "$v" 2>&1)
  echo "$checked" >> "$L"
  summary=$(echo "$checked" | grep -o "RACECHECK SUMMARY.*" | tail -1)
  rows+=("$(printf '%-12s %-22s %s' "$v" "${plain#"$v" }" "${summary:-no summary}")")
done
printf '%-12s %-22s %s\n' variant "plain run" racecheck
printf '%s\n' "${rows[@]}"
