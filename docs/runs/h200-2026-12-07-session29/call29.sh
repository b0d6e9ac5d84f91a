#!/usr/bin/env bash
# Session 29: every device call of the session runs this one script; each call continues where
# the last stopped, from build/devkeep while the machine stays warm (build/ is ignored, so the
# device keeps it between calls), or from RESUME_FROM (an unpacked run folder) on a fresh one.
#   Phase 1 (#36): judge 4 over all 90 at `medium` (session 27's callV.sh), until its manifest
#   says finished. Phase 2 (#37): session 24's callA.sh (the float32 contractions' search with
#   transpose_in_kernel) with the call's remaining seconds; its results resume the same way.
#   run: TOTAL=560 bash .devrun/call29.sh   (carry [".whl", ".devrun"]; timeout_s above TOTAL)
set -u
start=$(date +%s); total=${TOTAL:-560}
left() { echo $(( total - ($(date +%s) - start) )); }
sha=${SHA:-$(cat .devrun/sha)}; name="h200-${sha:0:7}-judge4"; keep=build/devkeep
mkdir -p "$keep"
if [ ! -f "$keep/$name.done" ]; then
  if [ -z "${RESUME_FROM:-}" ] && [ -d "$keep/$name" ]; then export RESUME_FROM="$keep/$name"; fi
  RUN_LIMIT=$(( $(left) - 25 )) bash .devrun/callV.sh
  if [ -f "$OUT/$name.tar.gz" ]; then
    rm -rf "${keep:?}/$name" && tar xzf "$OUT/$name.tar.gz" -C "$keep"
    python3 -c "import json,sys; sys.exit('finished_at' not in json.load(open('$keep/$name/manifest.json')))" \
      && touch "$keep/$name.done" && echo "phase 1: $name finished"
  fi
fi
if [ -f "$keep/$name.done" ] && [ "$(left)" -gt 90 ]; then
  [ -s "$keep/f32t.jsonl" ] && cp "$keep/f32t.jsonl" .devrun/f32t.jsonl
  F32_LIMIT=$(( $(left) - 15 )) QK_LIMIT=1 bash .devrun/callA.sh
  [ -s "$OUT/f32t.jsonl" ] && cp "$OUT/f32t.jsonl" "$keep/f32t.jsonl"
fi
echo "call29 used $(( $(date +%s) - start )) s"
