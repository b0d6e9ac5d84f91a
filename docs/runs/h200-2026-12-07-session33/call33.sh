#!/usr/bin/env bash
# Session 33 (call30.sh with its finished check reading the value): every device call of the session runs this one script (session 29's call29.sh with
# a phase between): each call continues where the last stopped, from build/devkeep while the
# machine stays warm, or from RESUME_FROM (an unpacked run folder) on a fresh one.
#   Phase 1 (#36): judge 4 over all 90 at `medium` (session 27's callV.sh) until its manifest
#   says finished.
#   Phase 2 (#36, this session's reward): the two near copies no fingerprint names, judged as
#   candidates at `small` and `medium` (tests/controls/adv_noop_copy_relu.py,
#   adv_near_copy_flash_attention.py): speedup (vs XLA) and speedup_shipped (vs the shipped
#   kernel timed beside them); the reward pays the smaller. With them, red team round 13's
#   adv_memcpy_init_one_hot (an output filled by a copy XLA makes outside any kernel, which the
#   kernel-only CUPTI timer may not see) and its honest twin adv_pos_full_tile_init_one_hot.
#   Once.
#   Phase 3 (#37): session 24's callA.sh (the float32 contractions' transpose_in_kernel search)
#   with the seconds left; its results resume the same way.
#   run: TOTAL=560 bash .devrun/call33.sh   (carry [".whl", ".devrun"]; timeout_s above TOTAL)
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
    python3 -c "import json,sys; sys.exit(not json.load(open('$keep/$name/manifest.json')).get('finished_at'))" \
      && touch "$keep/$name.done" && echo "phase 1: $name finished"
  fi
fi
if [ -f "$keep/$name.done" ] && [ ! -f "$keep/nearcopy.done" ] && [ "$(left)" -gt 300 ]; then
  export PYTHONPATH="$PWD"
  for size in small medium; do
    for pair in relu:adv_noop_copy_relu flash_attention:adv_near_copy_flash_attention \
        one_hot:adv_memcpy_init_one_hot one_hot:adv_pos_full_tile_init_one_hot; do
      timeout 120 python3 -m pallasbench_dataset.evaluate --task "${pair%%:*}" --device gpu \
        --size "$size" --kernel "tests/controls/${pair#*:}.py" --json \
        > "$OUT/nearcopy-${pair#*:}-$size.json" 2> "$OUT/nearcopy-${pair#*:}-$size.err"
      python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[1], r['status'], r.get('speedup'), r.get('speedup_shipped'), r.get('runtime_ms'), r.get('copy_of'), r.get('reasons'))" \
        "$OUT/nearcopy-${pair#*:}-$size.json" || tail -5 "$OUT/nearcopy-${pair#*:}-$size.err"
    done
  done
  touch "$keep/nearcopy.done"
fi
if [ -f "$keep/$name.done" ] && [ "$(left)" -gt 90 ]; then
  [ -s "$keep/f32t.jsonl" ] && cp "$keep/f32t.jsonl" .devrun/f32t.jsonl
  F32_LIMIT=$(( $(left) - 15 )) QK_LIMIT=1 bash .devrun/callA.sh
  [ -s "$OUT/f32t.jsonl" ] && cp "$OUT/f32t.jsonl" "$keep/f32t.jsonl"
fi
echo "call30 used $(( $(date +%s) - start )) s"
