#!/usr/bin/env bash
# Session 26, device call V (#36): judge 4 on the H200, every fixed kernel at `medium`, float32
# (each call's inputs drawn just before it and the L2 flushed; every timed output that fits
# 4 GiB checked). The first GPU run of judge 4: do the shipped kernels still pass?
#   run: bash .devrun/callV.sh   (carry [".whl", ".devrun"]), tree clean at the commit in .devrun/sha
set -u
sha=${SHA:-$(cat .devrun/sha)}
RUN_LIMIT=${RUN_LIMIT:-450} REPORT_LINES=70 bash scripts/gpu_run.sh "h200-${sha:0:7}-judge4" \
  --sizes medium --variants gpu --precisions float32 --git-commit "$sha"
