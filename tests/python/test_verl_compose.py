"""Checks of the VeRL/Slime wrappers that run without a GPU (run by
tests/backend_verl.rs with the backend venv; `python3 -m unittest` works too).

* VeRL's own trainer configuration (verl==0.9.1's YAML, composed with Hydra)
  accepts every override verl_trainer.sh passes, for both reward modes and
  both rollout engines, and every interpolation resolves; an unknown key is
  refused (so the check can fail).
* The reward entry point loads through VeRL's loader (its own
  `load_extern_object`, with the `reward_kwargs` merge VeRL applies) and
  scores rows that went through prepare_data.py and a parquet round trip.
* The tool config parses and its schema validates with VeRL's schema class.
* export_check.py accepts single-file and sharded (index.json) Hugging Face
  folders written by transformers and refuses a missing shard.
* Every flag the wrapper gives Slime is one Slime documents.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BACKENDS = os.path.join(ROOT, "examples", "backends")
VERL_DIR = os.path.join(BACKENDS, "verl")
sys.path[:0] = [BACKENDS, VERL_DIR]

import bat_reward  # noqa: E402
import bat_sandbox  # noqa: E402
import overrides as verl_overrides  # noqa: E402
import prepare_data  # noqa: E402


def verl_root() -> str:
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise unittest.SkipTest("verl is not installed")
    return list(spec.submodule_search_locations)[0]


def load_file(name: str, path: str):
    # `import verl` pulls in ray (the GPU stack); these modules need neither.
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def row(pack: dict, track: str, stage: str, n: int) -> dict:
    extra = {
        "state_id": f"verl-{track}-{stage}-{n}",
        "source_state_id": f"src-{track}",
        "track": track,
        "target_stage": stage,
        "view_index": n,
        "task_definition_version": pack["task_definition_version"],
        "reward_contract": bat_reward.expected_reward_contract(pack, stage),
    }
    return {"prompt": bat_sandbox.render_prompt(pack, extra), "extra_info": extra, "ability": "bat"}


class ComposeTest(unittest.TestCase):
    def compose(self, overrides: list):
        from hydra import compose, initialize_config_dir

        with initialize_config_dir(config_dir=os.path.join(verl_root(), "trainer", "config"), version_base=None):
            return compose("ppo_trainer", overrides=overrides)

    def wrapper_overrides(self, mode: str, env: dict) -> list:
        args = verl_overrides.parser().parse_args(
            ["--parquet", "/data/r01.parquet", "--checkpoint", "/models/base", "--steps-dir", "/scratch/ckpt",
             "--rows", "3024", "--experiment", "bat-r01-S3", "--reward-mode", mode]
        )
        return verl_overrides.overrides(args, env)

    def test_every_wrapper_override_composes_and_resolves(self):
        from omegaconf import OmegaConf

        for mode in ("stage", "terminal"):
            for env in ({}, {"BAT_ROLLOUT_ENGINE": "sglang", "BAT_TP": "4", "BAT_GPUS": "8", "BAT_MICRO_BATCH": "2"}):
                ovr = self.wrapper_overrides(mode, env)
                try:
                    cfg = self.compose(ovr)
                except Exception:
                    for o in ovr:  # one at a time, so the failure names its override
                        self.compose([o])
                    raise
                OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
                t = cfg.trainer
                self.assertEqual(t.total_training_steps, 3024 // 8)
                self.assertEqual(t.save_freq, t.total_training_steps)  # saves the last step
                self.assertEqual(t.resume_mode, "disable")
                self.assertEqual(t.rollout_data_dir, "/scratch/ckpt/rollouts")
                mt = cfg.actor_rollout_ref.rollout.multi_turn
                self.assertTrue(mt.enable)
                self.assertEqual(mt.format, "hermes")
                self.assertTrue(os.path.isfile(mt.tool_config_path))
                self.assertEqual(cfg.actor_rollout_ref.rollout.agent.default_agent_loop, "tool_agent")
                self.assertEqual(cfg.actor_rollout_ref.rollout.n, 4)
                self.assertEqual(cfg.actor_rollout_ref.rollout.tensor_model_parallel_size, int(env.get("BAT_TP", 1)))
                self.assertEqual(cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu, int(env.get("BAT_MICRO_BATCH", 1)))
                rf = cfg.reward.custom_reward_function
                self.assertTrue(os.path.isfile(rf.path))
                self.assertEqual(rf.name, "compute_score")
                self.assertEqual(rf.reward_kwargs.reward_mode, mode)

    def test_an_unknown_key_is_refused(self):
        from hydra.errors import ConfigCompositionException

        with self.assertRaises(ConfigCompositionException):
            self.compose(["trainer.save_every=1"])

    def test_the_reward_loads_and_scores_like_verls_loader_does(self):
        import pandas as pd
        from omegaconf import OmegaConf

        import_utils = load_file("verl_import_utils", os.path.join(verl_root(), "utils", "import_utils.py"))
        cfg = self.compose(self.wrapper_overrides("stage", {}))
        rf = cfg.reward.custom_reward_function
        raw_fn = import_utils.load_extern_object(module_path=rf.path, object_name=rf.name)

        pack = bat_reward.load_pack()
        rows = [row(pack, t, s, n) for n, (t, s) in enumerate([("vqa", "S1"), ("report", "S3"), ("vqa", "E2E")])]
        with tempfile.TemporaryDirectory() as d:
            parquet = os.path.join(d, "r.parquet")
            pd.DataFrame(prepare_data.convert(rows)).to_parquet(parquet)
            back = pd.read_parquet(parquet).to_dict("records")
        for mode in ("stage", "terminal"):
            kwargs = dict(OmegaConf.to_container(rf.get("reward_kwargs", {})), reward_mode=mode)
            fn = functools.partial(lambda raw, extra, *a, **k: raw(*a, **{**k, **extra}), raw_fn, kwargs)
            for r, v in zip(rows, back):
                extra = dict(v["extra_info"])
                extra["num_turns"] = 2  # VeRL's naive manager adds these
                good = fn(data_source=v["data_source"], solution_str=bat_sandbox.demonstration(pack, r["extra_info"]),
                          ground_truth=v["reward_model"]["ground_truth"], extra_info=extra)
                empty = fn(data_source="bat", solution_str="I will not call a tool.", ground_truth="", extra_info=extra)
                stage = r["extra_info"]["target_stage"]
                want = 1.0 if mode == "stage" or stage in ("S5", "E2E") else 0.0
                self.assertEqual(good["score"], want, (mode, stage, good))
                self.assertEqual(empty["score"], 0.0)
                self.assertEqual(empty["gate_cap"], 0.0)
                self.assertEqual(good["evidence_valid"], 1.0)

    def test_the_tool_config_validates_against_verls_schema(self):
        from omegaconf import OmegaConf

        schemas = load_file("verl_tool_schemas", os.path.join(verl_root(), "tools", "schemas.py"))
        cfg = OmegaConf.load(os.path.join(VERL_DIR, "tool_config.yaml"))
        (tool,) = cfg.tools
        self.assertEqual(tool.config.type, "native")
        schema = schemas.OpenAIFunctionToolSchema.model_validate(OmegaConf.to_container(tool.tool_schema, resolve=True))
        self.assertEqual(schema.function.name, "execute_code")
        self.assertEqual(sorted(schema.function.parameters.required), ["code", "language"])
        self.assertTrue(os.path.isfile(os.path.join(VERL_DIR, tool.class_name.split(".")[0] + ".py")))


class ExportCheckTest(unittest.TestCase):
    def run_check(self, d: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, os.path.join(VERL_DIR, "export_check.py"), d], capture_output=True, text=True)

    def test_single_and_sharded_folders_pass_and_a_missing_shard_fails(self):
        import torch
        from transformers import Qwen2Config, Qwen2ForCausalLM

        torch.manual_seed(0)
        model = Qwen2ForCausalLM(Qwen2Config(vocab_size=512, hidden_size=64, intermediate_size=128,
                                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2))
        with tempfile.TemporaryDirectory() as d:
            single, sharded = os.path.join(d, "single"), os.path.join(d, "sharded")
            model.save_pretrained(single)
            model.save_pretrained(sharded, max_shard_size="200KB")
            self.assertTrue(os.path.isfile(os.path.join(sharded, "model.safetensors.index.json")))
            self.assertEqual(self.run_check(single).returncode, 0, self.run_check(single).stderr)
            self.assertEqual(self.run_check(sharded).returncode, 0, self.run_check(sharded).stderr)
            with open(os.path.join(sharded, "model.safetensors.index.json")) as f:
                shard = sorted(set(json.load(f)["weight_map"].values()))[-1]
            os.remove(os.path.join(sharded, shard))
            r = self.run_check(sharded)
            self.assertEqual(r.returncode, 1)
            self.assertIn(shard, r.stderr)
            os.remove(os.path.join(single, "config.json"))
            self.assertEqual(self.run_check(single).returncode, 1)


class SlimeArgumentsTest(unittest.TestCase):
    def test_every_slime_flag_of_the_wrapper_is_documented_by_slime(self):
        with open(os.path.join(VERL_DIR, "slime_arguments.txt")) as f:
            known = {line.strip() for line in f if line.startswith("--")}
        with open(os.path.join(BACKENDS, "verl_trainer.sh")) as f:
            text = f.read()
        block = text[text.index('"$PY" train.py') : text.index('"$BAT_SLIME_DIR/tools/convert_torch_dist_to_hf.py"')]
        flags = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", block))
        self.assertGreater(len(flags), 15)
        self.assertEqual(sorted(flags - known), [])
        for needed in ("--custom-rm-path", "--save-interval", "--n-samples-per-prompt", "--metadata-key"):
            self.assertIn(needed, flags)


if __name__ == "__main__":
    unittest.main(verbosity=2)
