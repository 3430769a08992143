#!/usr/bin/env bash
# Create (once) the Python venv with the `mlflow` package that the MLflow
# mirror test (tests/mlflow.rs) starts `mlflow server` from and reads the
# mirrored runs back with, and print its interpreter path on stdout
# (examples/setup-pinned-venv.sh does the work).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
exec bash "$HERE/../setup-pinned-venv.sh" mlflow "$HERE/requirements-mlflow.txt"
