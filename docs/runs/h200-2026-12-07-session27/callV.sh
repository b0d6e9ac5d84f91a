#!/usr/bin/env bash
# Session 27, device call V (#36): judge 4's first GPU run. Every fixed kernel at `medium`, both
# precisions, in one run folder (each call's inputs drawn just before it, the L2 flushed, every
# timed output that fits 4 GiB checked). Done-criterion of #36: all 90 pass.
#   run: bash .devrun/callV.sh   (carry [".whl", ".devrun"]), tree clean at the commit in .devrun/sha
#   resume: RESUME_FROM=<unpacked run folder in the checkout> bash .devrun/callV.sh
set -u
sha=${SHA:-$(cat .devrun/sha)}
RUN_LIMIT=${RUN_LIMIT:-540} REPORT_LINES=100 bash scripts/gpu_run.sh "h200-${sha:0:7}-judge4" \
  --sizes medium --variants gpu --precisions float32 bfloat16 --git-commit "$sha"
