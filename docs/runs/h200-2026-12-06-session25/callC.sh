#!/usr/bin/env bash
# Session 24, device call C: ncu profiles of the contraction misses (#37) and the CUPTI probe
# (#36: does the timer see memsets and copies?); session 25 added the stale_temp probe (#36:
# does a dropped kernel result keep its value between calls?).
#   run: bash .devrun/callC.sh [task:precision ...]   (carry [".devrun"])
set -u
export PYTHONPATH=.
s=docs/runs/h200-2026-12-06-session24
timeout 100 python3 $s/cupti_probe.py > "$OUT/cupti-probe.jsonl" 2> "$OUT/cupti-probe.err"
echo "cupti probe rc=$?"; cat "$OUT/cupti-probe.jsonl"; tail -c 1500 "$OUT/cupti-probe.err"
timeout 90 python3 docs/runs/h200-2026-12-06-session25/stale_temp_probe.py > "$OUT/stale-temp-probe.txt" 2>&1
echo "stale_temp probe rc=$?"; tail -c 1500 "$OUT/stale-temp-probe.txt"
mkdir -p "$OUT/ncu"
timeout "${NCU_LIMIT:-420}" python3 $s/ncu_profile.py "$OUT/ncu" "$@" 2>&1 | tail -c 4000
cd "$OUT" && tar czf ncu.tar.gz ncu && rm -rf ncu
