"""The Hydra overrides of verl_trainer.sh, one per line (so the wrapper and
tests/python/test_verl_compose.py use the very same list).

    python3 overrides.py --parquet F --checkpoint D --steps-dir D --rows N \
        --tool-format hermes --experiment NAME --reward-mode stage|terminal

Every setting a round needs is explicit: GRPO with the manifest's
continuations per state, a save at the last step (VeRL's default
save_freq=-1 saves nothing), no resume (a replay must never continue the
original run's checkpoints), the BaT reward from bat_reward.py, multi-turn
tool calling with the pack's execute_code tool and budget, micro batches,
tensor parallelism and rollout memory, and a dump of every rollout (the
health file's measured counts come from it). Environment: BAT_GPUS (8),
BAT_NNODES (1), BAT_ROLLOUT_ENGINE (vllm|sglang), BAT_TP (1),
BAT_GPU_MEMORY (0.5), BAT_MICRO_BATCH (1), BAT_TRAIN_BATCH (8 = one bat
batch), BAT_LR (1e-6), BAT_MAX_RESPONSE_LENGTH (4096), BAT_SEED (0).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BACKENDS = os.path.dirname(HERE)


def overrides(a, env=os.environ) -> list:
    with open(a.pack or os.path.join(BACKENDS, "..", "..", "contract", "src", "default_pack.json")) as f:
        budget = json.load(f)["agentic_budget"]
    train_batch = int(env.get("BAT_TRAIN_BATCH", "8"))
    steps = max(1, math.ceil(a.rows / train_batch)) * a.epochs
    micro = env.get("BAT_MICRO_BATCH", "1")
    return [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={a.parquet}",
        f"data.val_files={a.parquet}",
        f"data.train_batch_size={train_batch}",
        f"data.max_prompt_length={budget['max_prompt_tokens']}",
        f"data.max_response_length={env.get('BAT_MAX_RESPONSE_LENGTH', '4096')}",
        "data.filter_overlong_prompts=True",
        "data.truncation=error",
        "data.return_raw_chat=True",
        "data.shuffle=True",
        f"data.seed={env.get('BAT_SEED', '0')}",
        f"actor_rollout_ref.model.path={a.checkpoint}",
        f"actor_rollout_ref.actor.optim.lr={env.get('BAT_LR', '1e-6')}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={train_batch}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro}",
        "actor_rollout_ref.actor.use_kl_loss=False",
        f"actor_rollout_ref.rollout.name={env.get('BAT_ROLLOUT_ENGINE', 'vllm')}",
        f"actor_rollout_ref.rollout.n={a.continuations}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={env.get('BAT_TP', '1')}",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={env.get('BAT_GPU_MEMORY', '0.5')}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={micro}",
        f"actor_rollout_ref.rollout.seed={env.get('BAT_SEED', '0')}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={micro}",
        "actor_rollout_ref.rollout.multi_turn.enable=True",
        f"actor_rollout_ref.rollout.multi_turn.format={a.tool_format}",
        f"actor_rollout_ref.rollout.multi_turn.tool_config_path={os.path.join(HERE, 'tool_config.yaml')}",
        f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={budget['max_assistant_turns']}",
        f"actor_rollout_ref.rollout.multi_turn.max_user_turns={budget['max_user_turns']}",
        f"actor_rollout_ref.rollout.multi_turn.max_tool_response_length={budget['max_tool_response_chars']}",
        "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent",
        f"reward.custom_reward_function.path={os.path.join(BACKENDS, 'bat_reward.py')}",
        "reward.custom_reward_function.name=compute_score",
        f"+reward.custom_reward_function.reward_kwargs.reward_mode={a.reward_mode}",
        f"+reward.custom_reward_function.reward_kwargs.tool_format={a.tool_format}",
        "trainer.total_epochs=" + str(a.epochs),
        f"trainer.total_training_steps={steps}",
        f"trainer.save_freq={steps}",
        "trainer.resume_mode=disable",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        f"trainer.n_gpus_per_node={env.get('BAT_GPUS', '8')}",
        f"trainer.nnodes={env.get('BAT_NNODES', '1')}",
        "trainer.logger=['console']",
        "trainer.project_name=bat",
        f"trainer.experiment_name={a.experiment}",
        f"trainer.default_local_dir={a.steps_dir}",
        f"trainer.rollout_data_dir={a.steps_dir}/rollouts",
    ]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parquet", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--steps-dir", required=True)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--continuations", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--tool-format", default="hermes")
    ap.add_argument("--experiment", default="bat")
    ap.add_argument("--reward-mode", default="stage", choices=["stage", "terminal"])
    ap.add_argument("--pack")
    return ap


if __name__ == "__main__":
    print("\n".join(overrides(parser().parse_args(sys.argv[1:]))))
