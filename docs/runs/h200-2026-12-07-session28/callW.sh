#!/usr/bin/env bash
# Session 28, device call W (#36): the first GPU contact of this session's judge changes, with
# what device time was left (about 360 s): matmul (Mosaic GPU at `medium`: its PTX now printed
# and captured from fd 1, never MOSAIC_GPU_DUMP_TO), relu and softmax (Triton), both precisions,
# at `medium`. Expected: 6 of 6 pass, and the matmul records carry Mosaic GPU PTX (ptx_bytes).
#   run: bash .devrun/callW.sh   (carry [".whl", ".devrun"]), tree clean at the commit in .devrun/sha
set -u
sha=${SHA:-$(cat .devrun/sha)}
RUN_LIMIT=${RUN_LIMIT:-170} REPORT_LINES=40 bash scripts/gpu_run.sh "h200-${sha:0:7}-judge4-smoke" \
  --sizes medium --variants gpu --precisions float32 bfloat16 --tasks matmul relu softmax \
  --git-commit "$sha"
