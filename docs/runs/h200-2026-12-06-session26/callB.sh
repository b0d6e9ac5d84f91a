#!/usr/bin/env bash
# Session 26, device call B: the judged run of the float32 stragglers and their bf16 twins at
# `large` with the tables call A wrote (#37), then memory-bound tasks and a gather at `medium`
# and `large` through judge 4's timing (#36: each call's inputs drawn just before it, the L2
# flushed, every timed output that fits 4 GiB checked).
#   after call A (docs/runs/h200-2026-12-06-session24/callA.sh, then its after_A.sh FILES_AT
#   docs/runs/h200-2026-12-06-session26).
#   run: bash .devrun/callB.sh   (carry [".whl", ".devrun"]), tree clean at the commit in .devrun/sha
set -u
sha=${SHA:-$(cat .devrun/sha)}
RUN_LIMIT=${RUN_LIMIT:-280} REPORT_LINES=40 bash scripts/gpu_run.sh "h200-${sha:0:7}-contractions" \
  --tasks matmul matmul_relu linear_bias_relu swiglu geglu batched_matmul \
  --sizes large --variants gpu --precisions float32 bfloat16 --git-commit "$sha"
RUN_LIMIT=${FEED_LIMIT:-170} REPORT_LINES=30 bash scripts/gpu_run.sh "h200-${sha:0:7}-feed" \
  --tasks relu add layernorm softmax embedding_lookup --sizes medium large --variants gpu \
  --precisions float32 --git-commit "$sha"
