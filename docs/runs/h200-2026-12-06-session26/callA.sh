#!/usr/bin/env bash
# Session 24 (run again in session 26), device call A (#37): the float32 contractions' search with `transpose_in_kernel`,
# then qk_softmax at bfloat16 (its kernels now store bf16). Both resume from .devrun's copies.
#   run: bash .devrun/callA.sh   (carry [".devrun"])
set -u
export PYTHONPATH=.
for f in f32t qk16; do [ -f ".devrun/$f.jsonl" ] && cp ".devrun/$f.jsonl" "$OUT/$f.jsonl"; done
timeout --signal=TERM "${F32_LIMIT:-330}" python3 -m pallasbench_dataset.autotune \
  --tasks matmul batched_matmul matmul_relu linear_bias_relu swiglu geglu --sizes large \
  --precisions float32 --backends mosaic_gpu --max-configs 60 --workers 16 \
  --results "$OUT/f32t.jsonl" > "$OUT/f32t.log" 2>&1
echo "f32 rc=$? lines=$(wc -l < "$OUT/f32t.jsonl")"; tail -n 15 "$OUT/f32t.log"
timeout --signal=TERM "${QK_LIMIT:-100}" python3 -m pallasbench_dataset.autotune \
  --tasks qk_softmax --sizes large medium --precisions bfloat16 --max-configs 40 --workers 16 \
  --results "$OUT/qk16.jsonl" > "$OUT/qk16.log" 2>&1
echo "qk rc=$? lines=$(wc -l < "$OUT/qk16.jsonl")"; tail -n 15 "$OUT/qk16.log"
