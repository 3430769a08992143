#!/usr/bin/env bash
# Trainer wrapper for `bat run`: one GRPO round with VeRL (default) or Slime.
#
# Template (trainer.json):
#   ["examples/backends/verl_trainer.sh", "{checkpoint}", "{dataset}",
#    "{output}", "{health}", "{runtime_tool_format}", "{round_id}",
#    "{target_stage}"]
#
# Contract with bat: leave an evaluation-ready Hugging Face folder at OUTPUT,
# and write {"status":"passed",...} to HEALTH only after training AND export
# both succeeded. Any failure exits non-zero and writes no health file.
#
# Settings (environment): BAT_BACKEND=verl|slime, BAT_GPUS (default 8),
# BAT_SCRATCH (default: a temp dir), BAT_ROLLOUT_ENGINE=vllm|sglang.
# Everything runs offline: no hub downloads, no remote loggers; rollout
# servers bind to 127.0.0.1 only.
set -euo pipefail

if [ "$#" -lt 7 ]; then
  echo "usage: $0 CHECKPOINT DATASET OUTPUT HEALTH RUNTIME_TOOL_FORMAT ROUND_ID TARGET_STAGE" >&2
  exit 64
fi
CHECKPOINT=$1 DATASET=$2 OUTPUT=$3 HEALTH=$4 TOOL_FORMAT=$5 ROUND_ID=$6 TARGET=$7
BACKEND=${BAT_BACKEND:-verl}
GPUS=${BAT_GPUS:-8}
ENGINE=${BAT_ROLLOUT_ENGINE:-vllm}
SCRATCH=${BAT_SCRATCH:-$(mktemp -d)}
mkdir -p "$SCRATCH"

# Offline and loopback only.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
export WANDB_MODE=disabled VLLM_HOST_IP=127.0.0.1 MASTER_ADDR=127.0.0.1
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost

# The round's rows are JSONL with "prompt", "reward_model", "extra_info";
# VeRL reads parquet.
PARQUET="$SCRATCH/$ROUND_ID-train.parquet"
python3 - "$DATASET" "$PARQUET" <<'PY'
import sys, pandas as pd
pd.read_json(sys.argv[1], lines=True).to_parquet(sys.argv[2])
PY

STEPS_DIR="$SCRATCH/$ROUND_ID-ckpt"
START=$(date +%s)
case "$BACKEND" in
  verl)
    python3 -m verl.trainer.main_ppo \
      algorithm.adv_estimator=grpo \
      data.train_files="$PARQUET" data.val_files="$PARQUET" \
      data.train_batch_size=8 \
      actor_rollout_ref.model.path="$CHECKPOINT" \
      actor_rollout_ref.rollout.name="$ENGINE" \
      actor_rollout_ref.rollout.n=4 \
      actor_rollout_ref.rollout.multi_turn.format="$TOOL_FORMAT" \
      trainer.total_epochs=1 \
      trainer.n_gpus_per_node="$GPUS" trainer.nnodes=1 \
      trainer.logger='["console"]' \
      trainer.project_name=bat trainer.experiment_name="bat-$ROUND_ID-$TARGET" \
      trainer.default_local_dir="$STEPS_DIR"
    LAST=$(ls -d "$STEPS_DIR"/global_step_* | sort -V | tail -n 1)
    python3 -m verl.model_merger merge --backend fsdp \
      --local_dir "$LAST/actor" --target_dir "$OUTPUT"
    ;;
  slime)
    # Slime: adapt the script path and arguments to your checkout.
    python3 train.py \
      --hf-checkpoint "$CHECKPOINT" --prompt-data "$DATASET" \
      --input-key prompt --label-key reward_model \
      --n-samples-per-prompt 4 --rollout-batch-size 8 --num-epoch 1 \
      --save "$STEPS_DIR" --rollout-num-gpus "$GPUS"
    python3 tools/convert_torch_dist_to_hf.py \
      --input-dir "$(ls -d "$STEPS_DIR"/iter_* | sort -V | tail -n 1)" \
      --output-dir "$OUTPUT" --origin-hf-dir "$CHECKPOINT"
    ;;
  *)
    echo "unknown BAT_BACKEND=$BACKEND (verl or slime)" >&2
    exit 64
    ;;
esac

test -f "$OUTPUT/config.json" || { echo "export left no config.json in $OUTPUT" >&2; exit 1; }
ROWS=$(wc -l < "$DATASET")
WALL=$(( $(date +%s) - START ))
# Health last: bat treats its presence with status "passed" as "trained and exported".
printf '{"status":"passed","backend":"%s","rows":%d,"rollouts":%d,"wall_seconds":%d}\n' \
  "$BACKEND" "$ROWS" "$((ROWS * 4))" "$WALL" > "$HEALTH"
