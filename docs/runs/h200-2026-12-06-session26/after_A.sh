#!/usr/bin/env bash
# here, after call A: keep its results, write the tables, commit, leave the sha for call B.
#   bash docs/runs/h200-2026-12-06-session26/after_A.sh FILES_AT
set -eu
at=$1; s=docs/runs/h200-2026-12-06-session26
cp "$at"/* $s/ 2>/dev/null || true
for f in f32t qk16; do [ -s "$s/$f.jsonl" ] && cp "$s/$f.jsonl" ".devrun/$f.jsonl"; done
for f in f32t qk16; do [ -s "$s/$f.jsonl" ] && .venv/bin/python -m pallasbench_dataset.autotune --write-tables "$s/$f.jsonl"; done
git add $s kernels_gpu && git commit -q -m "Session 26 call A (H200): the float32 contractions' search with transpose_in_kernel, results and the tables written from them" && git rev-parse HEAD | tee .devrun/sha
