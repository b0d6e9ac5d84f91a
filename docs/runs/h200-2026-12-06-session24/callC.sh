#!/usr/bin/env bash
# Session 24, device call C: ncu profiles of the contraction misses (#37) and the CUPTI probe
# (#36: does the timer see memsets and copies?).
#   run: bash .devrun/callC.sh [task:precision ...]   (carry [".devrun"])
set -u
export PYTHONPATH=.
s=docs/runs/h200-2026-12-06-session24
timeout 100 python3 $s/cupti_probe.py > "$OUT/cupti-probe.jsonl" 2> "$OUT/cupti-probe.err"
echo "cupti probe rc=$?"; cat "$OUT/cupti-probe.jsonl"; tail -c 1500 "$OUT/cupti-probe.err"
mkdir -p "$OUT/ncu"
timeout "${NCU_LIMIT:-420}" python3 $s/ncu_profile.py "$OUT/ncu" "$@" 2>&1 | tail -c 4000
cd "$OUT" && tar czf ncu.tar.gz ncu && rm -rf ncu
