#!/usr/bin/env bash
# Evaluator wrapper for `bat run`: serve the checkpoint with vLLM (default)
# or SGLang on 127.0.0.1, run your benchmark harness against it, stop the
# server.
#
# Template (evaluator.json):
#   ["examples/backends/vllm_evaluator.sh", "{checkpoint}", "{request}", "{output}"]
#
# REQUEST is bat's evaluation request (protocol id, repeats, required output
# shape). The harness must write OUTPUT: {"schema_version":1,
# "status":"complete","cells":[{"track","task_id","repeat","valid":true,
# "task_score","stages":{"S1".."S5"}}, ...]}. bat validates and summarizes it.
#
# Settings (environment): BAT_SERVER=vllm|sglang, BAT_PORT (default 8011),
# BAT_EVAL_HARNESS (required: a command run as
#   $BAT_EVAL_HARNESS --base-url http://127.0.0.1:PORT/v1 --request REQUEST --output OUTPUT).
# The server binds to the loopback interface only; nothing else is contacted.
set -euo pipefail

if [ "$#" -lt 3 ]; then
  echo "usage: $0 CHECKPOINT REQUEST OUTPUT" >&2
  exit 64
fi
CHECKPOINT=$1 REQUEST=$2 OUTPUT=$3
SERVER=${BAT_SERVER:-vllm}
PORT=${BAT_PORT:-8011}
HOST=127.0.0.1
: "${BAT_EVAL_HARNESS:?set BAT_EVAL_HARNESS to your benchmark harness command}"

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost

case "$SERVER" in
  vllm) vllm serve "$CHECKPOINT" --host "$HOST" --port "$PORT" --served-model-name bat-candidate & ;;
  sglang) python3 -m sglang.launch_server --model-path "$CHECKPOINT" --host "$HOST" --port "$PORT" \
            --served-model-name bat-candidate & ;;
  *) echo "unknown BAT_SERVER=$SERVER (vllm or sglang)" >&2; exit 64 ;;
esac
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true' EXIT

for _ in $(seq 1 600); do
  if curl -fsS "http://$HOST:$PORT/v1/models" >/dev/null 2>&1; then break; fi
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "$SERVER exited before becoming ready" >&2; exit 1; }
  sleep 1
done
curl -fsS "http://$HOST:$PORT/v1/models" >/dev/null

# shellcheck disable=SC2086 # the harness command may carry its own arguments
$BAT_EVAL_HARNESS --base-url "http://$HOST:$PORT/v1" --model bat-candidate \
  --request "$REQUEST" --output "$OUTPUT"
test -s "$OUTPUT"
