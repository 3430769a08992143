#!/usr/bin/env bash
# A complete 2-round BaT campaign on CPU: TRL's GRPOTrainer under `bat run`,
# evaluated through `transformers serve` and the OpenAI-API harness.
#
#   examples/backends/trl/run.sh WORK_DIR
#
# Needs: `bat` on PATH (or BAT=/path/to/bat) and BAT_PYTHON (default python3)
# with examples/backends/trl/requirements.txt installed. BAT_PYTHON is read
# here only: the templates name the interpreter it resolves to. Nothing is
# downloaded; servers bind to 127.0.0.1 only.
#
# Leaves in WORK_DIR: ledger/ (a bat ledger with the two round commits on
# main), base/ (the tiny starting model), setup/ (source grid, warm-up
# corpus, argv templates), work/ (bat's work dir). Then try:
#   bat -C WORK_DIR/ledger replay r02 --verify
#   bat -C WORK_DIR/ledger replay r01..r02 --ablate reward=terminal
#
# Duration: 795 s wall (1 min 49 s of CPU in this script's processes) on the
# project's 2-core machine while four other builds shared it; on an idle
# machine the parts measured about 1 min for the base model (tokenizer,
# 200 warm-up steps), 30 s per evaluation (server start + 10 episodes) and
# 30-50 s per GRPO round (8 steps), so 4-5 minutes in all.
# Settings: BAT_TRL_BATCHES (batches of 8 rows per round, default 2),
# BAT_TRL_TRACKS (evaluated tracks, default vqa,report).
set -euo pipefail
if [ "$#" -ne 1 ]; then
  echo "usage: $0 WORK_DIR" >&2
  exit 64
fi
W=$1
if [ -e "$W" ] && [ -n "$(ls -A "$W" 2>/dev/null)" ]; then
  echo "$W exists and is not empty" >&2
  exit 64
fi
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${BAT_PYTHON:-python3}
BAT=${BAT:-bat}
BATCHES=${BAT_TRL_BATCHES:-2}
TRACKS=${BAT_TRL_TRACKS:-vqa,report}
mkdir -p "$W"
W=$(cd "$W" && pwd)
PY=$(command -v "$PY")
export BAT_PYTHON=$PY
START=$(date +%s)

echo "== source grid and warm-up corpus"
"$BAT" source build --output-dir "$W/setup/source" >/dev/null
SRC="$W/setup/source/source.jsonl"
SHA=$(sha256sum "$SRC" | cut -d' ' -f1)
: >"$W/setup/warmup.jsonl"
for s in S1 S2 S3 S4 S5; do
  "$BAT" round build --source "$SRC" --source-sha256 "$SHA" --round-id "w$s" \
    --target-stage "$s" --batches 2 --seed warmup --output-dir "$W/setup/warmup-$s" >/dev/null
  cat "$W/setup/warmup-$s/train.jsonl" >>"$W/setup/warmup.jsonl"
done

echo "== tiny Qwen2 base model (local tokenizer, supervised warm-up)"
"$PY" "$HERE/make_base.py" "$W/base" --corpus "$W/setup/warmup.jsonl"

echo "== argv templates"
"$PY" - "$W/setup" "$PY" "$HERE" "$TRACKS" <<'PY'
import json, sys
setup, py, here, tracks = sys.argv[1:]
# The interpreter is an argv element of both templates (recorded with every
# round, and digested with the scripts), so a replay needs no BAT_PYTHON.
trainer = [py, f"{here}/train_grpo.py", "{checkpoint}", "{dataset}", "{output}", "{health}",
           "{runtime_tool_format}", "{round_id}", "{target_stage}", "--reward-mode", "{reward_mode}",
           "--seed", "{seed}", "--metrics", "{metrics}"]
evaluator = ["bash", f"{here}/evaluate.sh", "--python", py, "{checkpoint}", "{request}", "{output}",
             "--seed", "{seed}", "--tracks", tracks]
for name, t in (("trainer", trainer), ("evaluator", evaluator)):
    with open(f"{setup}/{name}.json", "w") as f:
        json.dump(t, f, indent=1)
PY

echo "== bat run: 2 rounds"
"$BAT" init "$W/ledger" >/dev/null
"$BAT" -C "$W/ledger" run --source "$SRC" --initial-checkpoint "$W/base" \
  --trainer "$W/setup/trainer.json" --evaluator "$W/setup/evaluator.json" \
  --protocol-id bat-trl-cpu-v1 --runtime-tool-format hermes \
  --rounds 2 --batches "$BATCHES" --work-dir "$W/work"
echo "run.sh: campaign finished in $(( $(date +%s) - START )) s; ledger $W/ledger"
