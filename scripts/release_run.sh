#!/usr/bin/env bash
# One full release run on the GPU machine (the device tool): every task x both variants
# (kernels_tpu, kernels_gpu) x medium, large, judged into $OUT/NAME, then packed by
# scripts/gpu_run.sh as $OUT/NAME.tar.gz with $OUT/NAME.log and $OUT/NAME.report.txt; the
# GPUs' clocks, power and performance state before the run go to $OUT/NAME.nvidia-smi.txt
# (the records carry the judges' own reading, taken under load).
#   GIT_COMMIT=<commit measured> [RESUME_FROM=DIR] [PRECISIONS="float32 bfloat16"] \
#     scripts/release_run.sh NAME
# A release is two such runs of one commit (NAME h200-<commit>-run1, then -run2: the card's
# reproducibility section compares them, and its rebuild command globs them in name order).
# A run stopped by the command's time limit (RUN_LIMIT, default 560 s; the manifest says
# interrupted) continues: unpack NAME.tar.gz into the checkout and call again with
# RESUME_FROM=<that folder>. Then build: python -m builder.regenerate --from-results R1 R2 --out data
# PRECISIONS (unset: float32 only, and the command says nothing of it) names the precisions the
# run measures, each the same tasks x variants x sizes; keep it the same when resuming.
set -uo pipefail
name=${1:?usage: GIT_COMMIT=<commit> scripts/release_run.sh NAME}
commit=${GIT_COMMIT:?set GIT_COMMIT to the commit measured: the copy of the tree on the GPU machine has no usable .git}
nvidia-smi -q -d CLOCK,POWER,PERFORMANCE > "$OUT/$name.nvidia-smi.txt" 2>&1 || true
RUN_LIMIT=${RUN_LIMIT:-560} REPORT_LINES=${REPORT_LINES:-20} \
  exec bash scripts/gpu_run.sh "$name" --sizes medium large --variants tpu,gpu \
  --git-commit "$commit" ${PRECISIONS:+--precisions $PRECISIONS}
