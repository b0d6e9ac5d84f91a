#!/usr/bin/env bash
# here, after call A: keep its results, write the tables, commit, leave the sha for call B.
#   bash docs/runs/h200-2026-12-06-session24/after_A.sh FILES_AT [RUN_DIR]   (sessions 24 and 26)
set -eu
at=$1; s=${2:-docs/runs/h200-2026-12-06-session24}; mkdir -p "$s"
cp "$at"/* "$s"/ 2>/dev/null || true
for f in f32t qk16; do [ -s "$s/$f.jsonl" ] && cp "$s/$f.jsonl" ".devrun/$f.jsonl"; done
for f in f32t qk16; do [ -s "$s/$f.jsonl" ] && .venv/bin/python -m pallasbench_dataset.autotune --write-tables "$s/$f.jsonl"; done
git add "$s" kernels_gpu && git commit -q -m "Call A (H200, $s): the float32 contractions' search with transpose_in_kernel, results and the tables written from them" && git rev-parse HEAD | tee .devrun/sha
