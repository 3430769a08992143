#!/usr/bin/env bash
# `bash examples/setup-pinned-venv.sh NAME REQUIREMENTS`: create (once) a
# small Python venv with the pinned packages of REQUIREMENTS and print its
# interpreter path on stdout. The test venvs that need one package each
# (rliable, tensorboard) are made by thin wrappers around this script.
#
# The venv lives at ${BAT_CI_CACHE:-$HOME/.cache/bat-ci}/venv-NAME-<hash>,
# where <hash> covers REQUIREMENTS, so a changed pin makes a new venv
# instead of mutating a cached one. BAT_SETUP_PYTHON picks the interpreter
# that makes it (default python3).
set -euo pipefail
NAME=$1
REQS=$2
HASH=$(sha256sum "$REQS" | cut -c1-12)
VENV="${BAT_CI_CACHE:-$HOME/.cache/bat-ci}/venv-$NAME-$HASH"
PY=${BAT_SETUP_PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ] || [ ! -e "$VENV/.complete" ]; then
  echo "creating $VENV" >&2
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
  "$VENV/bin/python" -m pip install --quiet -r "$REQS" >&2
  # Marks a finished install: an interrupted one is redone, not half-used.
  touch "$VENV/.complete"
fi
echo "$VENV/bin/python"
