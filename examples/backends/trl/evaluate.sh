#!/usr/bin/env bash
# Evaluator for `bat run` on CPU: serve CHECKPOINT with `transformers serve`
# on 127.0.0.1 (a free port), wait for /health, run the OpenAI-API harness
# (../openai_eval.py) against it, stop the server.
#
# Template (evaluator.json; run.sh writes it with absolute paths):
#   ["bash", "examples/backends/trl/evaluate.sh", "--python", "/path/to/venv/bin/python",
#    "{checkpoint}", "{request}", "{output}", "--seed", "{seed}", HARNESS-ARGS...]
# Extra arguments go to the harness (e.g. --tracks vqa,report --max-tokens 160;
# --seed is its sampling seed).
# --python PY: the interpreter (needs transformers[serving]); give it in the
# template so a replay does not depend on the caller's environment. Without
# it: BAT_PYTHON, else python3. BAT_SERVE_TIMEOUT: seconds to wait for
# /health (default 300).
set -euo pipefail
PY=${BAT_PYTHON:-python3}
if [ "${1:-}" = --python ]; then
  [ "$#" -ge 2 ] || { echo "$0: --python needs a value" >&2; exit 64; }
  PY=$2
  shift 2
fi
if [ "$#" -lt 3 ]; then
  echo "usage: $0 [--python PY] CHECKPOINT REQUEST OUTPUT [HARNESS-ARGS...]" >&2
  exit 64
fi
CHECKPOINT=$1 REQUEST=$2 OUTPUT=$3
shift 3
HERE=$(cd "$(dirname "$0")" && pwd)
HOST=127.0.0.1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost

PORT=$("$PY" "$HERE/../wait_ready.py" --free-port)
SERVER_LOG=$(mktemp "${TMPDIR:-/tmp}/bat-serve.XXXXXX")
# The `transformers` console script of the same interpreter, run through it
# so that the one interpreter (PY) decides which installation serves.
"$PY" -c 'import sys; from transformers.cli.transformers import main; sys.argv[0] = "transformers"; sys.exit(main())' \
  serve "$CHECKPOINT" --host "$HOST" --port "$PORT" --device cpu --dtype float32 >"$SERVER_LOG" 2>&1 &
SERVER_PID=$!
stop() {
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  rm -f "$SERVER_LOG"
}
trap stop EXIT

"$PY" "$HERE/../wait_ready.py" "$HOST" "$PORT" "$SERVER_PID" "${BAT_SERVE_TIMEOUT:-300}" || { cat "$SERVER_LOG" >&2; exit 1; }

"$PY" "$HERE/../openai_eval.py" --base-url "http://$HOST:$PORT/v1" --model "$CHECKPOINT" \
  --request "$REQUEST" --output "$OUTPUT" "$@"
test -s "$OUTPUT"
