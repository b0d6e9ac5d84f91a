#!/usr/bin/env bash
# Session 34: call33r.sh choosing where judge 4's run resumes from: the warm machine's
# build/devkeep copy when it has one, else the newest partial carried in .devrun
# (h200-669bfe8-judge4.tar.gz, from this session's earlier call), else session 32's committed one.
#   run: TOTAL=540 bash .devrun/call34.sh   (carry [".whl", ".devrun"])
set -u
tree=build/t669; name=h200-669bfe8-judge4
if [ ! -d "$tree/pallasbench_dataset" ]; then
  mkdir -p "$tree" && tar xzf .devrun/tree669.tar.gz -C "$tree" || exit 1
fi
rm -rf "$tree/.whl" "$tree/.devrun" && cp -r .whl .devrun "$tree/"
if [ -d "$tree/build/devkeep/$name" ]; then
  echo "resume: warm build/devkeep"
else
  src=docs/runs/h200-2026-12-07-session32/$name.tar.gz
  [ -f ".devrun/$name.tar.gz" ] && src=".devrun/$name.tar.gz"
  echo "resume: $src"
  mkdir -p "$tree/.devrun/resume" && tar xzf "$src" -C "$tree/.devrun/resume"
  export RESUME_FROM=".devrun/resume/$name"
fi
cd "$tree" && SHA=669bfe8e7a3128b4b2fa0684c1f202b5aaed7645 bash .devrun/call33.sh
