#!/usr/bin/env bash
# Create (once) the small Python venv with rliable 1.2.0 that the statistics
# cross-check (tests/compare_rliable.rs) uses, and print its interpreter path
# on stdout (examples/setup-pinned-venv.sh does the work).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
exec bash "$HERE/../setup-pinned-venv.sh" rliable "$HERE/requirements-rliable.txt"
