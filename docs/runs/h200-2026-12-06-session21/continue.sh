#!/usr/bin/env bash
# Release 6's device work left after session 21: run 1 of 7896061 is finished (360 of 360), run 2
# of the same commit is at 165 of 360: this resumes it to its end (about 20 judge-minutes). It
# runs on the device from a checkout of 7896061 itself (the code measured must be that commit's),
# with this script and the latest packs in .devrun (ignored, carried), for at most TOTAL seconds
# (default 540):
#   here:  s=docs/runs/h200-2026-12-06-session21; mkdir -p .devrun
#          git show main:$s/continue.sh > .devrun/continue.sh
#          for n in 1 2; do git show main:$s/h200-7896061-run$n.tar.gz > .devrun/h200-7896061-run$n.tar.gz; done
#          (or the latest pack of each run, named h200-7896061-runN.tar.gz)
#          git checkout --detach 78960618493cc27116f913c63afe9df9bbe6384f   # tree clean first
#          rm -rf data docs tests   # not read by a measurement; 7896061's tree is 47 MiB, and
#                                   # with .whl and the packs it would pass the 64 MiB a call
#   run:   TOTAL=540 bash .devrun/continue.sh   (carry [".whl", ".devrun"])
#   after: git checkout -- . && git checkout main; commit $OUT's files under docs/runs/<session>/; keep only each
#          run's latest pack in the tree (a resumed pack holds every record before it).
# A run whose pack in .devrun has a manifest with finished_at is done and skipped; one with a
# pack but no finished_at is resumed; one with no pack starts fresh.
set -u
commit=78960618493cc27116f913c63afe9df9bbe6384f
start=$(date +%s)
total=${TOTAL:-540}
for n in 1 2; do
  name="h200-${commit:0:7}-run$n"
  left=$(( total - ($(date +%s) - start) ))
  if [ "$left" -lt 100 ]; then echo "continue: $left s left, $name not started"; break; fi
  resume=
  if [ -f ".devrun/$name.tar.gz" ]; then
    mkdir -p "/tmp/prev-$n" && tar xzf ".devrun/$name.tar.gz" -C "/tmp/prev-$n" || exit 1
    if python3 -c "import json, sys; sys.exit(0 if json.load(open('/tmp/prev-$n/$name/manifest.json')).get('finished_at') else 1)"; then
      echo "continue: $name is finished"; continue
    fi
    resume="/tmp/prev-$n/$name"
  fi
  echo "continue: $name (${resume:+resumed from $resume, }$left s left)"
  RESUME_FROM=$resume GIT_COMMIT=$commit PRECISIONS="float32 bfloat16" RUN_LIMIT=$(( left - 30 )) \
    REPORT_LINES=4 bash scripts/release_run.sh "$name" 2>&1 \
    | grep -v "distributed\.\|CommClosed\|Stream is closed\|resource_tracker\|warnings.warn"
done
