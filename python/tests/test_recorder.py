"""The recorder: a plain training loop under the context manager, a round
directory recorded through it, and TRL's SFTTrainer training a tiny model
on CPU with the recorder's callback (2 checkpoint saves: 2 commits)."""

from __future__ import annotations

import os
import subprocess

import pytest

import batledger as bat
from conftest import REPO, bat_json


def git_repo(tmp_path):
    """A small training-code repository with one commit and a dirty file."""
    repo = tmp_path / "code"
    repo.mkdir()
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)
    run("init", "-q", "-b", "main")
    (repo / "train.py").write_text("print('train')\n")
    run("add", "train.py")
    run("-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "-m", "train")
    (repo / "train.py").write_text("print('train v2')\n")
    return repo


def test_plain_loop(empty, tmp_path):
    repo = git_repo(tmp_path)
    with bat.Recorder(empty, code_repo=repo, metadata={"run": "loop"}) as rec:
        for n in range(1, 4):
            out_dir = tmp_path / f"round-{n}"
            out_dir.mkdir()
            (out_dir / "weights.bin").write_bytes(bytes([n]) * 1000)
            rec.round(out_dir, metrics={"loss": 1.0 / n})
    log = bat_json("-C", empty, "log")
    assert len(log) == 3
    newest = log[0]["metadata"]
    assert newest["kind"] == "bat_trainer_round" and newest["round"] == 3
    assert newest["metrics"] == {"loss": 1.0 / 3}
    assert newest["run"] == "loop"
    code = newest["provenance"]["code"]
    assert code["branch"] == "main" and code["dirty"] is True and len(code["head_commit"]) == 40
    assert code == bat.code_provenance(repo)
    assert log[0]["fields"]["round"] == 3
    assert bat.Ledger(empty).read("HEAD", "weights.bin") == bytes([3]) * 1000


def test_round_directory_goes_through_round_validation(demo, tmp_path):
    work = tmp_path / "r01"
    bat.Ledger(demo).checkout("r01", work)
    dest = tmp_path / "new"
    from conftest import bat as cli

    cli("init", dest)
    with bat.Recorder(dest, code_repo=False) as rec:
        out = rec.round(work)
    assert out["round_id"] == "r01"
    assert bat_json("-C", dest, "log")[0]["metadata"]["kind"] == "bat_round"


def tiny_sft_run(output_dir, callback):
    """TRL's SFTTrainer on CPU: a 1-layer Qwen2 (hidden 32) with a word-level
    tokenizer made here, 4 optimizer steps, a checkpoint every 2 steps."""
    os.environ.setdefault("WANDB_MODE", "disabled")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from datasets import Dataset
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from trl import SFTConfig, SFTTrainer

    torch.set_num_threads(1)
    torch.manual_seed(0)
    texts = [f"round {i} step {j} reward {i * j % 5}" for i in range(8) for j in range(4)]
    words = sorted({w for t in texts for w in t.split()})
    vocab = {w: i for i, w in enumerate(["<pad>", "<eos>", "<unk>", *words])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    config = Qwen2Config(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                         pad_token_id=0, eos_token_id=1, tie_word_embeddings=True)
    model = Qwen2ForCausalLM(config)
    args = SFTConfig(output_dir=str(output_dir), max_steps=4, save_strategy="steps", save_steps=2,
                     per_device_train_batch_size=4, logging_steps=1, report_to="none", use_cpu=True,
                     seed=0, max_length=32, dataset_text_field="text", save_only_model=True,
                     dataloader_num_workers=0)
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_dict({"text": texts}),
                         processing_class=tokenizer, callbacks=[callback])
    trainer.train()


def test_trl_callback_records_two_rounds(empty, tmp_path):
    try:
        import trl  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("trl is not installed in this interpreter")
    out = tmp_path / "sft"
    with bat.Recorder(empty, code_repo=REPO) as rec:
        tiny_sft_run(out, rec.trl_callback(every="save"))
    log = bat_json("-C", empty, "log")
    assert [c["metadata"]["round"] for c in log] == [2, 1]
    assert [c["metadata"]["metrics"]["steps"] for c in log] == [4, 2]
    assert all("loss" in c["metadata"]["metrics"]["last_logged"] for c in log)
    ledger = bat.Ledger(empty)
    for commit, step in ((log[0], 4), (log[1], 2)):
        ckpt = out / f"checkpoint-{step}"
        on_disk = sorted(str(p.relative_to(ckpt)) for p in ckpt.rglob("*") if p.is_file())
        files = ledger.files(commit["id"])
        assert sorted(f["path"] for f in files) == on_disk
        assert "model.safetensors" in on_disk
        assert ledger.read(commit["id"], "model.safetensors") == (ckpt / "model.safetensors").read_bytes()
    # The two rounds trained different weights.
    assert ledger.read(log[0]["id"], "model.safetensors") != ledger.read(log[1]["id"], "model.safetensors")
