#!/usr/bin/env bash
# Evaluator wrapper for `bat run`: serve the checkpoint with vLLM (default)
# or SGLang on 127.0.0.1 with tool calling in the runtime tool format,
# run the OpenAI-API harness (openai_eval.py) against it, stop the server.
#
# Template (evaluator.json):
#   ["examples/backends/vllm_evaluator.sh", "--python", "/path/to/venv/bin/python",
#    "{checkpoint}", "{request}", "{output}", "--seed", "{seed}", HARNESS-ARGS...]
# Extra arguments go to the harness (e.g. --tracks vqa,report --max-tokens 4096);
# its --seed (the campaign's `{seed}`) also seeds the server. --python PY: the
# interpreter (default: BAT_PYTHON, else python3); settings you set below are
# declared in the object form of the template ({"argv": [...], "env":
# ["BAT_SERVER", ...]}) so bat records them and a replay checks them.
#
# REQUEST is bat's evaluation request (protocol id, repeats, required output
# shape); the harness writes OUTPUT in the raw schema `bat eval summarize`
# reads. Settings (environment): BAT_SERVER=vllm|sglang, BAT_PYTHON
# (python3), BAT_PORT (default: a free port), BAT_TP (tensor parallel size,
# 1), BAT_GPU_MEMORY (0.85), BAT_TOOL_FORMAT (hermes; vLLM parser `hermes`,
# SGLang parser `qwen25`, both the <tool_call>{json}</tool_call> format),
# BAT_SERVE_TIMEOUT (900 s). Binds to the loopback interface only; nothing
# else is contacted. Needs a GPU: not run on the project's CPU machines
# (examples/backends/trl/evaluate.sh runs the same harness on CPU).
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
# The harness's --seed, if given, seeds the server too.
SEED=0
prev=
for arg in "$@"; do
  [ "$prev" = --seed ] && SEED=$arg
  prev=$arg
done
SERVER=${BAT_SERVER:-vllm}
HOST=127.0.0.1
PORT=${BAT_PORT:-$("$PY" "$HERE/wait_ready.py" --free-port)}
TP=${BAT_TP:-1}
TOOL_FORMAT=${BAT_TOOL_FORMAT:-hermes}
[ "$TOOL_FORMAT" = hermes ] || { echo "tool format $TOOL_FORMAT: only hermes is wired up" >&2; exit 64; }

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost

case "$SERVER" in
  vllm)
    "$PY" -m vllm.entrypoints.openai.api_server --model "$CHECKPOINT" --served-model-name bat-candidate \
      --host "$HOST" --port "$PORT" --tensor-parallel-size "$TP" \
      --gpu-memory-utilization "${BAT_GPU_MEMORY:-0.85}" --seed "$SEED" \
      --enable-auto-tool-choice --tool-call-parser hermes &
    ;;
  sglang)
    "$PY" -m sglang.launch_server --model-path "$CHECKPOINT" --served-model-name bat-candidate \
      --host "$HOST" --port "$PORT" --tp-size "$TP" \
      --mem-fraction-static "${BAT_GPU_MEMORY:-0.85}" --random-seed "$SEED" \
      --tool-call-parser qwen25 &
    ;;
  *) echo "unknown BAT_SERVER=$SERVER (vllm or sglang)" >&2; exit 64 ;;
esac
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true' EXIT

"$PY" "$HERE/wait_ready.py" "$HOST" "$PORT" "$SERVER_PID" "${BAT_SERVE_TIMEOUT:-900}"

"$PY" "$HERE/openai_eval.py" --base-url "http://$HOST:$PORT/v1" --model bat-candidate \
  --request "$REQUEST" --output "$OUTPUT" --tool-format "$TOOL_FORMAT" --send-tools "$@"
test -s "$OUTPUT"
