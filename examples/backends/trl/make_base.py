"""Create the tiny starting model of the CPU GRPO example, offline.

    python make_base.py OUT_DIR --corpus train.jsonl [--seed 0] [--sft-steps 200]

1. Trains a byte-level BPE tokenizer (``tokenizers``) on the corpus prompts
   and on correct tool-call completions, with ChatML specials and a chat
   template, saved as a ``PreTrainedTokenizerFast``.
2. Builds a Qwen2 model from a config (2 layers, hidden 64; about 0.3 M
   parameters) whose ``vocab_size`` is the tokenizer's length.
3. Warms it up with a short supervised pass (plain PyTorch, loss on the
   completion only) on ``bat_sandbox.demonstration`` completions: one bash
   ``execute_code`` call in the hermes format that creates the row's
   artifacts. GRPO then has a policy that sometimes emits a working call.
4. Saves ``config.json``, ``model.safetensors`` and the tokenizer files.

The corpus is a round view bat built (``bat round build``): training-side
rows only. Nothing is downloaded. Seeded, one thread, deterministic kernels:
the same inputs give the same bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import bat_reward  # noqa: E402
import bat_sandbox  # noqa: E402

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# What `transformers serve` parses out of a reply: the text only. Its
# built-in Qwen2 template also extracts <tool_call> JSON and answers HTTP 500
# when a call is malformed, which a model this small emits often; the
# harness reads the calls from the text instead (as the trainer's reward does).
RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {"content": {"close_pattern": r"\s*(?:<\|im_end\|>|<\|endoftext\|>)", "content": "text"}},
}
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Single tokens, but not special: trainers and servers decode completions
# with skip_special_tokens=True, which would delete them and with them every
# tool call.
TOOL_TAGS = ["<tool_call>", "</tool_call>"]


def deterministic(seed: int):
    import torch
    import transformers

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.set_seed(seed, deterministic=True)
    return torch


def chat_text(tokenizer, prompt: list) -> str:
    return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)


def train_tokenizer(texts: list, vocab_size: int):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TAGS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.response_template = RESPONSE_TEMPLATE
    return fast


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--corpus", required=True, help="a round view's train.jsonl")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab-size", type=int, default=1024)
    ap.add_argument("--sft-steps", type=int, default=200)
    ap.add_argument("--sft-batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=5e-3)
    a = ap.parse_args()

    torch = deterministic(a.seed)
    from transformers import Qwen2Config, Qwen2ForCausalLM

    pack = bat_reward.load_pack()
    rows = [json.loads(line) for line in open(a.corpus, encoding="utf-8") if line.strip()]
    demos = [bat_sandbox.demonstration(pack, r["extra_info"]) for r in rows]

    # The tokenizer sees the prompts as the chat template lays them out.
    raw = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>" for r in rows for m in r["prompt"]]
    tokenizer = train_tokenizer(raw + demos, a.vocab_size)

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    model.train()

    # Supervised warm-up: prompt tokens are context, the completion is the
    # target. Stage rows only: an E2E demonstration is 4-5 times longer than
    # the completion budget of the GRPO rounds.
    examples = []
    for r, demo in zip(rows, demos):
        if r["extra_info"].get("target_stage") == bat_reward.E2E:
            continue
        p = tokenizer(chat_text(tokenizer, r["prompt"]), add_special_tokens=False)["input_ids"]
        c = tokenizer(demo + "<|im_end|>", add_special_tokens=False)["input_ids"]
        examples.append((p + c, [-100] * len(p) + c))
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr)
    g = torch.Generator().manual_seed(a.seed)
    losses = []
    for step in range(a.sft_steps):
        idx = torch.randint(len(examples), (a.sft_batch,), generator=g).tolist()
        batch = [examples[i] for i in idx]
        width = max(len(ids) for ids, _ in batch)
        ids = torch.full((len(batch), width), tokenizer.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for j, (x, y) in enumerate(batch):
            ids[j, : len(x)] = torch.tensor(x)
            labels[j, : len(y)] = torch.tensor(y)
            mask[j, : len(x)] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        if step % 25 == 0 or step == a.sft_steps - 1:
            print(f"make_base: sft step {step} loss {loss.item():.4f}", flush=True)

    model.eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    os.makedirs(a.out_dir, exist_ok=True)
    model.save_pretrained(a.out_dir, safe_serialization=True)
    tokenizer.save_pretrained(a.out_dir)
    n = sum(p.numel() for p in model.parameters())
    print(
        f"make_base: {n} parameters, vocab {len(tokenizer)}, {len(rows)} rows, "
        f"sft loss {losses[0]:.3f} -> {losses[-1]:.3f}; wrote {a.out_dir}",
        flush=True,
    )


if __name__ == "__main__":
    main()
