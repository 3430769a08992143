#!/usr/bin/env bash
# Create (once) the small Python venv with the `tensorboard` package that the
# TensorBoard export test (tests/tensorboard.rs) reads bat's event files back
# with, and print its interpreter path on stdout.
#
# The venv lives at ${BAT_CI_CACHE:-$HOME/.cache/bat-ci}/venv-tensorboard-<hash>,
# where <hash> covers requirements-tensorboard.txt, so a changed pin makes a
# new venv instead of mutating a cached one.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REQS="$HERE/requirements-tensorboard.txt"
HASH=$(sha256sum "$REQS" | cut -c1-12)
VENV="${BAT_CI_CACHE:-$HOME/.cache/bat-ci}/venv-tensorboard-$HASH"
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
