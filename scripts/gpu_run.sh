#!/usr/bin/env bash
# Runs on the GPU machine (the device tool): measures into $OUT/<name>, prints the report,
# and packs the run folder into $OUT/<name>.tar.gz (the device returns at most 8 files).
#   [RESUME_FROM=DIR] scripts/gpu_run.sh NAME [regenerate arguments...]
# The machine has jax 0.11.2 but neither `datasets` nor Dask: Dask travels as wheels in .whl
# (carry it), the run measures only, and the dataset is built here with --from-results.
set -uo pipefail
name=$1; shift
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/site"
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # absolute: the exporter runs in a scratch folder
nvidia-smi --query-gpu=index,uuid,name,driver_version,pstate,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,utilization.gpu --format=csv
# RESUME_FROM=<run folder in the checkout>: continue that run (its copy here) instead.
resume=()
if [ -n "${RESUME_FROM:-}" ]; then
  cp -r "$RESUME_FROM" "$OUT/$name" && resume=(--resume) || exit 1
fi
start=$(date +%s)
# Stop measuring before the device's 10-minute limit so the folder still gets packed;
# SIGTERM ends the run cleanly (the manifest says interrupted, --resume continues it).
timeout --signal=TERM "${RUN_LIMIT:-540}" \
  python3 -m builder.regenerate --device gpu --measure-only --results "$OUT/$name" "${resume[@]}" "$@" 2>&1 | tee "$OUT/$name.log"
echo "wall: $(( $(date +%s) - start )) s"
python3 -m pallasbench_dataset.evaluation.pipeline.report "$OUT/$name" > "$OUT/$name.report.txt" 2>&1
tar czf "$OUT/$name.tar.gz" -C "$OUT" "$name" && rm -rf "${OUT:?}/$name"
tail -n "${REPORT_LINES:-60}" "$OUT/$name.report.txt"
grep -q " pass " "$OUT/$name.report.txt"  # exit status: did anything pass?
