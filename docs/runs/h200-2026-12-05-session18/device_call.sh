#!/usr/bin/env bash
# Session 18's first device call: the judge-cost probe, then release 6 run 1 of this commit
# (both precisions; resumable) for what is left of the command's 10 minutes.
#   [TOTAL=<seconds the whole call may take, default 540>] \
#     bash docs/runs/h200-2026-12-05-session18/device_call.sh <full commit sha>
set -u
commit=${1:?usage: device_call.sh <commit>}
start=$(date +%s)
PYTHONPATH=. timeout 240 python3 docs/runs/h200-2026-12-05-session18/judge_cost_probe.py \
  > "$OUT/judge-cost.jsonl" 2> "$OUT/judge-cost.err"
echo "probe: rc $? in $(( $(date +%s) - start )) s"
grep -v '"profile"' "$OUT/judge-cost.jsonl"
limit=$(( ${TOTAL:-540} - ($(date +%s) - start) ))
GIT_COMMIT=$commit PRECISIONS="float32 bfloat16" RUN_LIMIT=$limit REPORT_LINES=8 \
  bash scripts/release_run.sh "h200-${commit:0:7}-run1"
