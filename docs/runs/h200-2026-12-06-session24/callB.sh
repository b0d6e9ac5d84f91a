#!/usr/bin/env bash
# Session 24, device call B: the contraction family and the bf16-store kernels at `large`, both
# precisions, through the judge at the checkout's commit; then the memcheck probe (#36).
#   run: SHA=<sha> bash .devrun/callB.sh   (carry [".whl", ".devrun"]), tree clean at the commit measured
set -u
sha=${SHA:-$(cat .devrun/sha)}
RUN_LIMIT=${RUN_LIMIT:-300} REPORT_LINES=80 bash scripts/gpu_run.sh "h200-${sha:0:7}-contractions" \
  --tasks matmul matmul_relu linear_bias_relu swiglu geglu batched_matmul qk_softmax \
          pairwise_distance multi_head_attention triangle_update flash_attention \
  --sizes large --variants gpu --precisions float32 bfloat16 --git-commit "$sha"
PEEK_CONTROL=tests/controls/adv_peek_past_end_reduce_sum.py PYTHONPATH=. timeout 120 \
  python3 docs/runs/h200-2026-12-06-session22/memcheck_probe.py > "$OUT/memcheck-probe.jsonl" 2> "$OUT/memcheck-probe.err"
echo "probe rc=$?"; tail -c 2000 "$OUT/memcheck-probe.jsonl"
[ -f .devrun/qk16.jsonl ] && cp .devrun/qk16.jsonl "$OUT/qk16.jsonl"
PYTHONPATH=. timeout --signal=TERM "${QK_LIMIT:-80}" python3 -m pallasbench_dataset.autotune \
  --tasks qk_softmax --sizes large medium --precisions bfloat16 --max-configs 40 --workers 16 \
  --results "$OUT/qk16.jsonl" > "$OUT/qk16.log" 2>&1
echo "qk rc=$? lines=$(wc -l < "$OUT/qk16.jsonl")"; tail -n 12 "$OUT/qk16.log"
