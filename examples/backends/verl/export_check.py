"""Check that a folder is an evaluation-ready Hugging Face model, and print
the numbers the health file reports.

    python3 export_check.py MODEL_DIR                 # exit 1 and say why if not
    python3 export_check.py MODEL_DIR --rollouts DIR  # also measure DIR/*.jsonl

A model is ``config.json`` plus either ``model.safetensors`` or a
``model.safetensors.index.json`` whose every shard is present, non-empty and
inside the folder (large merges are sharded). With ``--rollouts`` (VeRL's
``trainer.rollout_data_dir``: one JSONL file per step) it prints
``{"steps", "rollouts", "generated_tokens"}``: files, lines, and the tokens of
the dumped responses re-encoded with the model's tokenizer (in multi-turn
rollouts that includes the tool responses placed in the response).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys


def problems(d: str) -> list:
    out = []
    cfg = os.path.join(d, "config.json")
    try:
        with open(cfg, encoding="utf-8") as f:
            if not isinstance(json.load(f), dict):
                out.append("config.json is not a JSON object")
    except (OSError, ValueError) as e:
        out.append(f"config.json: {e}")
    single = os.path.join(d, "model.safetensors")
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.isfile(single) and os.path.getsize(single) > 0:
        return out
    if not os.path.isfile(index):
        return out + ["neither model.safetensors nor model.safetensors.index.json"]
    try:
        with open(index, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return out + [f"model.safetensors.index.json: {e}"]
    if not isinstance(weight_map, dict) or not weight_map:
        return out + ["model.safetensors.index.json has an empty weight_map"]
    for shard in sorted(set(weight_map.values())):
        parts = str(shard).split("/")
        if os.path.isabs(str(shard)) or ".." in parts:
            out.append(f"shard {shard!r} points outside the folder")
            continue
        p = os.path.join(d, *parts)
        if not (os.path.isfile(p) and os.path.getsize(p) > 0):
            out.append(f"shard {shard} is missing or empty")
    return out


def measure(model_dir: str, rollouts_dir: str) -> dict:
    files = sorted(glob.glob(os.path.join(rollouts_dir, "*.jsonl")))
    outputs = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            outputs.extend(json.loads(line)["output"] for line in f if line.strip())
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    tokens = sum(len(tok(o, add_special_tokens=False)["input_ids"]) for o in outputs)
    return {"steps": len(files), "rollouts": len(outputs), "generated_tokens": tokens}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--rollouts")
    a = ap.parse_args()
    bad = problems(a.model_dir)
    if bad:
        for b in bad:
            print(f"export_check: {a.model_dir}: {b}", file=sys.stderr)
        return 1
    if a.rollouts:
        print(json.dumps(measure(a.model_dir, a.rollouts), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
