#!/usr/bin/env bash
# Create (once) the small Python venv with rliable 1.2.0 that the statistics
# cross-check (tests/compare_rliable.rs) uses, and print its interpreter path
# on stdout.
#
# The venv lives at ${BAT_CI_CACHE:-$HOME/.cache/bat-ci}/venv-rliable-<hash>,
# where <hash> covers requirements-rliable.txt, so a changed pin makes a new
# venv instead of mutating a cached one.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REQS="$HERE/requirements-rliable.txt"
HASH=$(sha256sum "$REQS" | cut -c1-12)
VENV="${BAT_CI_CACHE:-$HOME/.cache/bat-ci}/venv-rliable-$HASH"
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
