#!/usr/bin/env bash
# Re-resolves constraints.txt: a fresh venv, the project with every extra but the GPU ones,
# then `pip freeze`. Run after changing dependencies in pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3.12}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --upgrade pip
"$tmp/venv/bin/python" -m pip install --quiet -e ".[hub,analysis,test,evolve]"
"$tmp/venv/bin/python" -m pip install --quiet --no-deps shinka-evolve  # as scripts/setup.sh does
{
  echo "# Pinned versions for CI and regeneration (pip install -c constraints.txt ...)."
  echo "# jax/jaxlib 0.11.2 match the GPU machine's image. Regenerate with scripts/lock.sh."
  "$tmp/venv/bin/python" -m pip freeze --exclude-editable | grep -v '^-e' | sort -f
} > constraints.txt
echo "constraints.txt: $(grep -vc '^#' constraints.txt) pins"
