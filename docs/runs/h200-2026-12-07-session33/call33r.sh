#!/usr/bin/env bash
# Session 33: call33.sh run in the tree of commit 669bfe8 (`git archive 669bfe8 -o
# .devrun/tree669.tar -- pallasbench_dataset kernels_gpu kernels_tpu builder scripts
# pyproject.toml setup.cfg constraints.txt`), so that run h200-669bfe8-judge4 resumes on exactly
# the code its records name while the checkout here moves on. build/ is kept on a warm machine.
#   run: TOTAL=560 bash .devrun/call33r.sh   (carry [".whl", ".devrun"])
set -u
tree=build/t669
if [ ! -d "$tree/pallasbench_dataset" ]; then
  mkdir -p "$tree" && tar xzf .devrun/tree669.tar.gz -C "$tree" || exit 1
fi
rm -rf "$tree/.whl" "$tree/.devrun" && cp -r .whl .devrun "$tree/"
# The run so far (40 of 90), from its committed tarball, where no warm machine kept it.
mkdir -p "$tree/.devrun/resume" && tar xzf docs/runs/h200-2026-12-07-session32/h200-669bfe8-judge4.tar.gz -C "$tree/.devrun/resume"
cd "$tree" && SHA=669bfe8e7a3128b4b2fa0684c1f202b5aaed7645 bash .devrun/call33.sh
