#!/bin/bash
# The bfloat16 search of the ten contraction kernels' Mosaic GPU spaces on the H200, `large`
# first (the goals' size), then `medium`; each stage bounded so that the whole fits one call
# of the device tool. Resumes: lines already in $1 are skipped.
# Usage (on the GPU machine, repository root): tune_bf16.sh RESULTS.jsonl LOG_DIR
set -u
results=$1 logs=$2
tasks="matmul matmul_relu matmul_gelu matmul_silu linear_bias_relu swiglu geglu batched_matmul gated_mlp transformer_block"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$logs/gpu.txt"
timeout 330 python3 -m pallasbench_dataset.autotune --results "$results" --precisions bfloat16 \
  --sizes large --backends mosaic_gpu --max-configs 32 --tasks $tasks 2>&1 | tee "$logs/tune-large.log"
timeout 200 python3 -m pallasbench_dataset.autotune --results "$results" --precisions bfloat16 \
  --sizes medium --backends mosaic_gpu --max-configs 16 --tasks $tasks 2>&1 | tee "$logs/tune-medium.log"
