#!/usr/bin/env bash
# Create (once) the Python venv the backend examples and their tests use, and
# print its interpreter path on stdout.
#
# The venv lives at ${BAT_CI_CACHE:-$HOME/.cache/bat-ci}/venv-trl-<hash>, where
# <hash> covers the requirement files and the VeRL pin below, so a changed pin
# makes a new venv instead of mutating a cached one. About 5.5 GB and 2-3
# minutes from a cold pip cache (torch ships CUDA wheels; they run on CPU).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
VERL_PIN=verl==0.9.1
# python/requirements-test.txt: the Python API's tests (maturin, pytest,
# pandas, polars, matplotlib, blake3) run in this venv too, since the TRL
# recorder test needs torch and trl next to the built module.
REQS=("$HERE/trl/requirements.txt" "$HERE/verl/requirements-compose.txt" "$HERE/../../python/requirements-test.txt")
HASH=$( { cat "${REQS[@]}"; echo "$VERL_PIN --no-deps"; } | sha256sum | cut -c1-12)
VENV="${BAT_CI_CACHE:-$HOME/.cache/bat-ci}/venv-trl-$HASH"
PY=${BAT_SETUP_PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ] || [ ! -e "$VENV/.complete" ]; then
  echo "creating $VENV" >&2
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
  "$VENV/bin/python" -m pip install --quiet -r "${REQS[0]}" -r "${REQS[1]}" -r "${REQS[2]}" >&2
  # VeRL without its GPU stack: enough to compose its Hydra configuration and
  # to load its reward loader's helpers; `import verl` itself needs ray.
  "$VENV/bin/python" -m pip install --quiet --no-deps "$VERL_PIN" >&2
  # Marks a finished install: an interrupted one is redone, not half-used.
  touch "$VENV/.complete"
fi
echo "$VENV/bin/python"
