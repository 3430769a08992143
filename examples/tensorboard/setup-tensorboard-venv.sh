#!/usr/bin/env bash
# Create (once) the small Python venv with the `tensorboard` package that the
# TensorBoard export test (tests/tensorboard.rs) reads bat's event files back
# with, and print its interpreter path on stdout (examples/setup-pinned-venv.sh
# does the work).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
exec bash "$HERE/../setup-pinned-venv.sh" tensorboard "$HERE/requirements-tensorboard.txt"
