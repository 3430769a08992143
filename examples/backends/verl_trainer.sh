#!/usr/bin/env bash
# Trainer wrapper for `bat run`: one GRPO round with VeRL (default) or Slime.
#
# Template (trainer.json; the object form declares the settings below that
# you set, so bat records them with each round and a replay refuses to
# start without them):
#   {"argv": ["examples/backends/verl_trainer.sh", "--python", "/path/to/venv/bin/python",
#             "{checkpoint}", "{dataset}", "{output}", "{health}",
#             "{runtime_tool_format}", "{round_id}", "{target_stage}",
#             "{reward_mode}", "{seed}"],
#    "env": ["BAT_BACKEND", "BAT_GPUS"]}
# (`{reward_mode}`: `stage`, or `terminal` under `bat replay --ablate
# reward=terminal`; `{seed}`: the campaign's seed (`bat run --seed`,
# default 0), VeRL's data and rollout seeds and Slime's --seed and
# --rollout-seed. Both optional as arguments; BAT_SEED is the fallback.)
# --python PY: the interpreter (default: BAT_PYTHON, else python3).
#
# Contract with bat: leave an evaluation-ready Hugging Face folder at OUTPUT
# (config.json + model.safetensors, or a model.safetensors.index.json with
# all its shards), and write {"status":"passed",...} to HEALTH only after
# training AND export both succeeded. Any failure exits non-zero and writes
# no health file.
#
# VeRL: the Hydra overrides come from verl/overrides.py (GRPO, the manifest's
# continuations per state, save at the last step, no resume, the BaT reward,
# multi-turn tool calling with the execute_code tool, micro batches, tensor
# parallelism, rollout memory, rollout dumps); the last step's FSDP actor is
# merged into OUTPUT with VeRL's own model merger.
# Slime: the same round through Slime's train.py (BAT_SLIME_DIR, your
# checkout) with its documented arguments, the reward through
# --custom-rm-path bat_reward.slime_rm, and tools/convert_torch_dist_to_hf.py.
#
# Settings (environment): BAT_BACKEND=verl|slime, BAT_PYTHON (python3; see
# --python),
# BAT_GPUS (8), BAT_ROLLOUT_ENGINE=vllm|sglang, BAT_TP (1), BAT_GPU_MEMORY
# (0.5), BAT_MICRO_BATCH (1), BAT_TRAIN_BATCH (8), BAT_SCRATCH (default: a
# new temp dir; every run gets its own fresh checkpoint folder inside it).
# Everything runs offline: no hub downloads, no remote loggers; rollout
# servers bind to 127.0.0.1 only. Not runnable on the CPU-only CI machines:
# tests/python/test_verl_compose.py checks the configuration, the reward
# loader path and the export check there instead.
set -euo pipefail

PY=${BAT_PYTHON:-python3}
if [ "${1:-}" = --python ]; then
  [ "$#" -ge 2 ] || { echo "$0: --python needs a value" >&2; exit 64; }
  PY=$2
  shift 2
fi
if [ "$#" -lt 7 ]; then
  echo "usage: $0 [--python PY] CHECKPOINT DATASET OUTPUT HEALTH RUNTIME_TOOL_FORMAT ROUND_ID TARGET_STAGE [REWARD_MODE [SEED]]" >&2
  exit 64
fi
CHECKPOINT=$1 DATASET=$2 OUTPUT=$3 HEALTH=$4 TOOL_FORMAT=$5 ROUND_ID=$6 TARGET=$7
REWARD_MODE=${8:-stage}
case "$REWARD_MODE" in stage|terminal) ;; *) echo "unknown reward mode $REWARD_MODE" >&2; exit 64 ;; esac
# verl/overrides.py and the Slime arguments below read the seed from BAT_SEED.
export BAT_SEED=${9:-${BAT_SEED:-0}}
case "$BAT_SEED" in ''|*[!0-9]*) echo "the seed must be a non-negative integer, not $BAT_SEED" >&2; exit 64 ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
BACKEND=${BAT_BACKEND:-verl}
GPUS=${BAT_GPUS:-8}
ENGINE=${BAT_ROLLOUT_ENGINE:-vllm}
mkdir -p "${BAT_SCRATCH:-${TMPDIR:-/tmp}}"
# A fresh folder per invocation: a replay (or a retry) must never find, and
# resume from, the checkpoints of an earlier run of the same round.
SCRATCH=$(mktemp -d "${BAT_SCRATCH:-${TMPDIR:-/tmp}}/bat-$ROUND_ID.XXXXXX")
STEPS_DIR="$SCRATCH/ckpt"
ROWS=$(grep -c . "$DATASET")

# Offline and loopback only.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
export WANDB_MODE=disabled VLLM_HOST_IP=127.0.0.1 MASTER_ADDR=127.0.0.1
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
export BAT_TOOL_FORMAT=$TOOL_FORMAT BAT_REWARD_MODE=$REWARD_MODE
export PYTHONPATH="$HERE:$HERE/verl${PYTHONPATH:+:$PYTHONPATH}"

case "$BACKEND" in
  verl)
    PARQUET="$SCRATCH/$ROUND_ID-train.parquet"
    "$PY" "$HERE/verl/prepare_data.py" "$DATASET" "$PARQUET"
    mapfile -t OVERRIDES < <("$PY" "$HERE/verl/overrides.py" --parquet "$PARQUET" \
      --checkpoint "$CHECKPOINT" --steps-dir "$STEPS_DIR" --rows "$ROWS" \
      --tool-format "$TOOL_FORMAT" --experiment "bat-$ROUND_ID-$TARGET" --reward-mode "$REWARD_MODE")
    "$PY" -m verl.trainer.main_ppo "${OVERRIDES[@]}"
    LAST=$(ls -d "$STEPS_DIR"/global_step_* 2>/dev/null | sort -V | tail -n 1)
    [ -n "$LAST" ] || { echo "VeRL saved no global_step_* in $STEPS_DIR" >&2; exit 1; }
    "$PY" -m verl.model_merger merge --backend fsdp --local_dir "$LAST/actor" --target_dir "$OUTPUT"
    ROLLOUTS_DIR="$STEPS_DIR/rollouts"
    ;;
  slime)
    : "${BAT_SLIME_DIR:?set BAT_SLIME_DIR to your Slime checkout}"
    METER="$SCRATCH/meter.jsonl"
    export BAT_METER_FILE=$METER
    JSONL="$SCRATCH/$ROUND_ID-train.jsonl"
    # Slime reads JSONL; the row's extra_info goes along as metadata (as JSON
    # text, for the same reason as in verl/prepare_data.py).
    "$PY" - "$DATASET" "$JSONL" <<'PY'
import json, sys
with open(sys.argv[1]) as src, open(sys.argv[2], "w") as dst:
    for line in src:
        if line.strip():
            r = json.loads(line)
            dst.write(json.dumps({"prompt": r["prompt"], "label": "",
                "extra_info": {"bat_extra_info_json": json.dumps(r["extra_info"], sort_keys=True)}}) + "\n")
PY
    ROLLOUTS=$(( (ROWS + 7) / 8 ))
    (cd "$BAT_SLIME_DIR" && "$PY" train.py \
      --hf-checkpoint "$CHECKPOINT" --ref-load "$CHECKPOINT" \
      --prompt-data "$JSONL" --input-key prompt --label-key label --metadata-key extra_info \
      --apply-chat-template --rollout-shuffle --rollout-seed "${BAT_SEED:-0}" --seed "${BAT_SEED:-0}" \
      --advantage-estimator grpo --n-samples-per-prompt 4 \
      --rollout-batch-size 8 --global-batch-size 32 --num-rollout "$ROLLOUTS" \
      --micro-batch-size "${BAT_MICRO_BATCH:-1}" \
      --rollout-max-response-len "${BAT_MAX_RESPONSE_LENGTH:-4096}" \
      --custom-rm-path bat_reward.slime_rm \
      --tensor-model-parallel-size "${BAT_TP:-1}" --rollout-num-gpus-per-engine "${BAT_TP:-1}" \
      --sglang-mem-fraction-static "${BAT_GPU_MEMORY:-0.5}" \
      --actor-num-nodes 1 --actor-num-gpus-per-node "$GPUS" --colocate \
      --save "$STEPS_DIR" --save-interval "$ROLLOUTS" --no-save-optim)
    LAST=$(ls -d "$STEPS_DIR"/iter_* 2>/dev/null | sort -V | tail -n 1)
    [ -n "$LAST" ] || { echo "Slime saved no iter_* in $STEPS_DIR" >&2; exit 1; }
    "$PY" "$BAT_SLIME_DIR/tools/convert_torch_dist_to_hf.py" \
      --input-dir "$LAST" --output-dir "$OUTPUT" --origin-hf-dir "$CHECKPOINT"
    ;;
  *)
    echo "unknown BAT_BACKEND=$BACKEND (verl or slime)" >&2
    exit 64
    ;;
esac

"$PY" "$HERE/verl/export_check.py" "$OUTPUT"
case "$BACKEND" in
  verl) COMPUTE=$("$PY" "$HERE/verl/export_check.py" "$OUTPUT" --rollouts "$ROLLOUTS_DIR") ;;
  slime) COMPUTE=$("$PY" -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(json.dumps({"steps": int(sys.argv[2]), "rollouts": len(rows), "generated_tokens": sum(r["response_length"] for r in rows)}, sort_keys=True))' "$METER" "$ROLLOUTS") ;;
esac
# Health last: bat treats its presence with status "passed" as "trained and exported".
"$PY" - "$HEALTH" "$BACKEND" "$ROWS" "$REWARD_MODE" "$COMPUTE" <<'PY'
import json, os, sys
path, backend, rows, mode, compute = sys.argv[1:]
health = {"status": "passed", "backend": backend, "rows": int(rows), "reward_mode": mode,
          "budget": {"continuations_per_state": 4, "rows_per_step": 8},
          "compute": json.loads(compute)}
tmp = path + ".tmp"
with open(tmp, "w") as f:
    json.dump(health, f, sort_keys=True, indent=2)
    f.write("\n")
os.replace(tmp, path)
PY
