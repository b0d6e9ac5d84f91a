#!/usr/bin/env bash
# Runs on the GPU machine (the device tool): measures into $OUT/<name>, prints the report,
# and packs the run folder into $OUT/<name>.tar.gz (the device returns at most 8 files).
#   scripts/gpu_run.sh NAME [regenerate arguments...]
# The machine has jax 0.11.2 but no `datasets`: measure only; build here with --from-results.
set -uo pipefail
name=$1; shift
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD"  # absolute: the sandboxed exporter runs in a scratch folder
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu --format=csv
start=$(date +%s)
# Stop measuring before the device's 10-minute limit so the folder still gets packed.
timeout --signal=INT "${RUN_LIMIT:-540}" \
  python3 -m builder.regenerate --device gpu --measure-only --results "$OUT/$name" "$@" 2>&1 | tee "$OUT/$name.log"
echo "wall: $(( $(date +%s) - start )) s"
python3 -m pallasbench_dataset.evaluation.report "$OUT/$name" > "$OUT/$name.report.txt" 2>&1
tar czf "$OUT/$name.tar.gz" -C "$OUT" "$name" && rm -rf "${OUT:?}/$name"
tail -n "${REPORT_LINES:-60}" "$OUT/$name.report.txt"
grep -q " pass " "$OUT/$name.report.txt"  # exit status: did anything pass?
