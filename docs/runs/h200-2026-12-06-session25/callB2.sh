#!/usr/bin/env bash
# Session 25, device call 1 (the one to make if only one machine can be had): the judged run of
# the contraction family and the bf16-store kernels at `large`, both precisions (#37), then the
# three probes of #36: memcheck on peek_past_end, the stale_temp state, CUPTI and memsets.
#   run: bash .devrun/callB2.sh   (carry [".whl", ".devrun"]), tree clean at the commit in .devrun/sha
set -u
sha=${SHA:-$(cat .devrun/sha)}
RUN_LIMIT=${RUN_LIMIT:-290} REPORT_LINES=80 bash scripts/gpu_run.sh "h200-${sha:0:7}-contractions" \
  --tasks matmul matmul_relu linear_bias_relu swiglu geglu batched_matmul qk_softmax \
          pairwise_distance multi_head_attention triangle_update flash_attention \
  --sizes large --variants gpu --precisions float32 bfloat16 --git-commit "$sha"
export PYTHONPATH=.
PEEK_CONTROL=tests/controls/adv_peek_past_end_reduce_sum.py timeout 110 \
  python3 docs/runs/h200-2026-12-06-session22/memcheck_probe.py > "$OUT/memcheck-probe.jsonl" 2> "$OUT/memcheck-probe.err"
echo "memcheck probe rc=$?"; tail -c 1500 "$OUT/memcheck-probe.jsonl"
timeout 60 python3 docs/runs/h200-2026-12-06-session25/stale_temp_probe.py > "$OUT/stale-temp-probe.txt" 2>&1
echo "stale_temp probe rc=$?"; tail -c 1200 "$OUT/stale-temp-probe.txt"
timeout 80 python3 docs/runs/h200-2026-12-06-session24/cupti_probe.py > "$OUT/cupti-probe.jsonl" 2> "$OUT/cupti-probe.err"
echo "cupti probe rc=$?"; tail -c 1200 "$OUT/cupti-probe.jsonl"
