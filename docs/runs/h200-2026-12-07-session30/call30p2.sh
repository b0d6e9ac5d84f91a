#!/usr/bin/env bash
# Session 30, a short call of call30.sh's phase 2 alone, for a machine got late in the session:
# the two near copies no fingerprint names and round 13's untimed-copy one_hot with its honest
# twin, each judged as a candidate on the GPU at `medium` (speedup vs XLA, speedup_shipped vs
# the shipped kernel timed beside it, runtime; the reward pays the smaller speedup).
#   run: bash .devrun/call30p2.sh   (carry [".whl", ".devrun"]; timeout_s 600)
set -u
export PYTHONPATH="$PWD"
for pair in relu:adv_noop_copy_relu one_hot:adv_memcpy_init_one_hot \
    one_hot:adv_pos_full_tile_init_one_hot flash_attention:adv_near_copy_flash_attention; do
  timeout 130 python3 -m pallasbench_dataset.evaluate --task "${pair%%:*}" --device gpu \
    --size medium --kernel "tests/controls/${pair#*:}.py" --json \
    > "$OUT/nearcopy-${pair#*:}-medium.json" 2> "$OUT/nearcopy-${pair#*:}-medium.err"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[1].rsplit('/',1)[1], r['status'], r.get('speedup'), r.get('speedup_shipped'), r.get('runtime_ms'), r.get('shipped_ms'), r.get('baseline_ms'), r.get('copy_of'), r.get('reasons'))" \
    "$OUT/nearcopy-${pair#*:}-medium.json" || tail -5 "$OUT/nearcopy-${pair#*:}-medium.err"
done
