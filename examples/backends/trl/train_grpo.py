"""Trainer for `bat run`: one GRPO round with TRL on CPU.

Template (trainer.json; run.sh writes it with absolute paths):

    [PYTHON, "examples/backends/trl/train_grpo.py", "{checkpoint}", "{dataset}",
     "{output}", "{health}", "{runtime_tool_format}", "{round_id}",
     "{target_stage}", "--reward-mode", "{reward_mode}", "--seed", "{seed}",
     "--metrics", "{metrics}"]

``--seed`` (the campaign's ``{seed}``, default 0) seeds transformers/torch,
the trainer's sampler and the data order.

Reads the round view bat materialized (``train.jsonl``: ``prompt`` chat
messages and ``extra_info``), starts from the Hugging Face folder
``CHECKPOINT`` and trains it with TRL's ``GRPOTrainer``: ``--generations``
continuations per state form one group; each continuation's tool calls are
executed in a sandbox (bat_sandbox.py) and scored by the BaT reward
(bat_reward.py; ``--reward-mode terminal`` is the final-outcome-only
ablation). The candidate is written to ``OUTPUT`` the same way (config,
safetensors, tokenizer with its chat template), then the health file, last.

Health: ``status``, the declared ``budget`` (bat compares it between arms),
and the measured ``compute``: optimizer ``steps`` (TRL's global step),
``rollouts`` (completions scored) and ``generated_tokens`` (their token
count, from the completion ids TRL passes to the reward). No wall-clock
figure goes into the health file: it is a compared artifact of
``bat replay --verify`` (bat records the trainer's wall time itself).

Step metrics (``--metrics``, bat's ``{metrics}``): one JSON line per
optimizer step from TRL's log history (``logging_steps=1``): ``step``,
``reward_mean``, ``reward_std``, ``kl``, ``loss``, ``grad_norm``,
``learning_rate``, ``entropy`` where TRL logged them; no timing figures,
so the file is as deterministic as the training.

Determinism: seeded (TRL/transformers ``set_seed``, the round's sampler),
one CPU thread, ``torch.use_deterministic_algorithms(True)``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import bat_reward  # noqa: E402


class Metered(bat_reward.BatReward):
    """The BaT reward, counting what it scored (the measured compute)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.rollouts = 0
        self.generated_tokens = 0
        self.errors = 0
        self.verified = 0
        self.score_sum = 0.0

    def __call__(self, prompts=None, completions=None, completion_ids=None, **kwargs):
        out = super().__call__(prompts=prompts, completions=completions, **kwargs)
        self.rollouts += len(out)
        self.generated_tokens += sum(len(c) for c in (completion_ids or []))
        self.errors += sum(1 for p in self.payloads if "error" in p)
        self.verified += sum(1 for p in self.payloads if p.get("gate_cap") == 1.0)
        self.score_sum += sum(out)
        return out


def write_json_atomic(path: str, value: dict) -> None:
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".health-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(value, f, sort_keys=True, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# TRL log-history key -> step metric name; only deterministic figures.
STEP_KEYS = {
    "reward": "reward_mean",
    "reward_std": "reward_std",
    "kl": "kl",
    "loss": "loss",
    "grad_norm": "grad_norm",
    "learning_rate": "learning_rate",
    "entropy": "entropy",
}


def write_step_metrics(path: str, log_history: list) -> None:
    """One line per logged training step (docs/backends.md, ``{metrics}``)."""
    lines = []
    for entry in log_history:
        if "step" not in entry or "train_runtime" in entry:
            continue
        row = {"step": int(entry["step"])}
        for key, name in STEP_KEYS.items():
            v = entry.get(key)
            if isinstance(v, (int, float)) and math.isfinite(v):
                row[name] = float(v)
        if len(row) > 1:
            lines.append(json.dumps(row, sort_keys=True))
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(l + "\n" for l in lines))


def main() -> None:
    ap = argparse.ArgumentParser()
    for name in ("checkpoint", "dataset", "output", "health", "tool_format", "round_id", "target_stage"):
        ap.add_argument(name)
    ap.add_argument("--reward-mode", default="stage", choices=["stage", "terminal"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--metrics", default=None, help="step metrics file to write (bat's {metrics})")
    ap.add_argument("--generations", type=int, default=4, help="continuations per state (the GRPO group)")
    ap.add_argument("--states-per-step", type=int, default=2)
    ap.add_argument("--max-completion-length", type=int, default=96)
    ap.add_argument("--learning-rate", type=float, default=5e-4)
    ap.add_argument("--epochs", type=int, default=1)
    a = ap.parse_args()
    if a.tool_format != "hermes":
        sys.exit(f"train_grpo: runtime tool format {a.tool_format!r} is not supported (hermes only)")

    import torch
    import transformers
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.set_seed(a.seed, deterministic=True)

    rows = [json.loads(line) for line in open(a.dataset, encoding="utf-8") if line.strip()]
    # extra_info travels as JSON text: its nested members differ between
    # stage and E2E rows, which Arrow would otherwise unify into nulls.
    ds = Dataset.from_list(
        [{"prompt": r["prompt"], "extra_info": json.dumps(r["extra_info"], sort_keys=True)} for r in rows]
    )
    tokenizer = AutoTokenizer.from_pretrained(a.checkpoint)
    model = AutoModelForCausalLM.from_pretrained(a.checkpoint, dtype=torch.float32)
    reward = Metered(a.reward_mode, a.tool_format)

    scratch = tempfile.mkdtemp(prefix=f"bat-trl-{a.round_id}-")
    args = GRPOConfig(
        output_dir=scratch,
        use_cpu=True,
        seed=a.seed,
        data_seed=a.seed,
        num_generations=a.generations,
        per_device_train_batch_size=a.generations * a.states_per_step,
        gradient_accumulation_steps=1,
        max_completion_length=a.max_completion_length,
        num_train_epochs=a.epochs,
        learning_rate=a.learning_rate,
        temperature=1.0,
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        dataloader_num_workers=0,
        bf16=False,
        fp16=False,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=args,
        train_dataset=ds,
        processing_class=tokenizer,
    )
    try:
        trainer.train()
    finally:
        # GRPOConfig insists on an output folder; nothing is saved there
        # (save_strategy "no"), so it goes with the round.
        shutil.rmtree(scratch, ignore_errors=True)

    os.makedirs(a.output, exist_ok=True)
    trainer.model.save_pretrained(a.output, safe_serialization=True)
    tokenizer.save_pretrained(a.output)
    if not os.path.isfile(os.path.join(a.output, "config.json")):
        sys.exit(f"train_grpo: export left no config.json in {a.output}")

    if a.metrics:
        write_step_metrics(a.metrics, trainer.state.log_history)

    rollouts = max(reward.rollouts, 1)
    health = {
        "status": "passed",
        "backend": "trl",
        "round_id": a.round_id,
        "target_stage": a.target_stage,
        "reward_mode": a.reward_mode,
        "reward_version": reward.pack["reward_version"],
        "seed": a.seed,
        "rows": len(rows),
        "budget": {
            "epochs": a.epochs,
            "continuations_per_state": a.generations,
            "states_per_step": a.states_per_step,
            "max_completion_length": a.max_completion_length,
        },
        "compute": {
            "steps": int(trainer.state.global_step),
            "rollouts": reward.rollouts,
            "generated_tokens": reward.generated_tokens,
        },
        "reward": {
            "mean": round(reward.score_sum / rollouts, 6),
            "verified_rollouts": reward.verified,
            "evidence_errors": reward.errors,
        },
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }
    # Last: bat reads a passed health file as "trained and exported".
    write_json_atomic(a.health, health)
    print(f"train_grpo: {a.round_id} {json.dumps(health['compute'])} reward {health['reward']}", flush=True)


if __name__ == "__main__":
    main()
