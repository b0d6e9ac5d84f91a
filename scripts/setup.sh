#!/usr/bin/env bash
# Creates .venv with a Python >= 3.12 and installs the project from the pinned
# constraints (jax/jaxlib 0.11.2, the version on the GPU machine). Idempotent:
# a second run with unchanged pins does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv
stamp="$venv/.pallasbench-installed"
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$venv/bin/python" -c '' 2>/dev/null; then
  exit 0
fi

is_ok() {  # a runnable interpreter of version >= 3.12
  "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}

find_python() {
  local c
  if [ -n "${PYTHON:-}" ]; then
    is_ok "$PYTHON" && { echo "$PYTHON"; return 0; }
    echo "setup: PYTHON=$PYTHON is not a runnable Python >= 3.12" >&2
    return 1
  fi
  for c in python3.12 python3.13 python3.14 python3; do
    if command -v "$c" >/dev/null 2>&1 && is_ok "$c"; then command -v "$c"; return 0; fi
  done
  # pyenv shims refuse to run a version that is not selected: look in pyenv's folder directly.
  if command -v pyenv >/dev/null 2>&1; then
    for c in $(ls -d "$(pyenv root)"/versions/3.1[2-9]* 2>/dev/null | sort -V); do
      is_ok "$c/bin/python" && { echo "$c/bin/python"; return 0; }
    done
  fi
  return 1
}

if ! py=$(find_python); then
  cat >&2 <<'MSG'
setup: no Python >= 3.12 found (JAX 0.11 needs it).
Looked for python3.12, python3.13, python3.14, python3 on PATH and in pyenv's versions.
Install one (for example `pyenv install 3.12` or your system's python3.12 package),
or point PYTHON at it: PYTHON=/path/to/python3.12 ./scripts/setup.sh
MSG
  exit 1
fi
echo "setup: using $py ($("$py" -c 'import sys; print(sys.version.split()[0])'))"

rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -c constraints.txt -e ".[hub,analysis,test,evolve]"
# ShinkaEvolve without its declared dependencies (why: the `evolve` extra in pyproject.toml).
"$venv/bin/python" -m pip install --quiet --no-deps -c constraints.txt shinka-evolve
echo "$want" > "$stamp"
echo "setup: .venv ready (jax $("$venv/bin/python" -c 'import jax; print(jax.__version__)'))"
