"""Benchmark harness: run the pack's tasks against any OpenAI-compatible
chat endpoint (vLLM, SGLang, `transformers serve`) and write the raw
evaluation file `bat eval summarize` reads (contract section D).

    python3 openai_eval.py --base-url http://127.0.0.1:PORT/v1 --model NAME \
        --request eval-request.json --output raw.json \
        [--tool-format hermes] [--tracks vqa,report] [--max-tokens 192]

For every track (all of the pack's unless --tracks) and every repeat the
request asks for, the harness plays one episode per stage S1..S5: the
stage's task prompt (contract C.5, with the earlier stages' artifacts handed
over), one chat completion, the tool calls it contains executed in a fresh
sandbox (bat_sandbox.py), and the stage's rubric checks. The cell's stage
score is that episode's rubric score, zeroed when no tool call ran and
changed the workspace (the same execution cap as the reward); its task score
is the S5 episode's submission score. Greedy decoding (temperature 0) with a
fixed seed, so a deterministic server gives the same file twice.

Tool calls come back either inside the message text (a server without a tool
parser) or parsed into ``message.tool_calls`` (vLLM/SGLang with a hermes
parser); both are executed. Evaluation rows use their own ids
(``heldout-<track>-<repeat>-<stage>``), never training rows. Standard library
only; the endpoint must be on this machine or one you trust.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bat_reward  # noqa: E402
import bat_sandbox  # noqa: E402


# The pack prompt's one tool, for servers that parse tool calls (vLLM,
# SGLang): sent with --send-tools so their parser is engaged.
EXECUTE_CODE = {
    "type": "function",
    "function": {
        "name": "execute_code",
        "description": "Run bash or python code in the task workspace.",
        "parameters": {
            "type": "object",
            "properties": {"language": {"type": "string", "enum": ["bash", "python"]}, "code": {"type": "string"}},
            "required": ["language", "code"],
        },
    },
}


def chat(base_url: str, model: str, messages: list, max_tokens: int, seed: int, timeout: float, tools: bool) -> dict:
    body = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "seed": seed,
        "stream": False,
    }
    if tools:
        body["tools"] = [EXECUTE_CODE]
        body["tool_choice"] = "auto"
    body = json.dumps(body).encode()
    req = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": "Bearer local"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def completion_text(message: dict) -> str:
    """The assistant text with any parsed tool calls put back in hermes form."""
    text = message.get("content") or ""
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        args = fn.get("arguments")
        try:
            args = json.loads(args) if isinstance(args, str) else args
        except ValueError:
            args = None
        text += "<tool_call>" + json.dumps({"name": fn.get("name"), "arguments": args}) + "</tool_call>"
    return text


def episode(pack: dict, a, track: str, repeat: int, stage: str) -> tuple:
    extra = {
        "state_id": f"heldout-{track}-{repeat}-{stage}",
        "source_state_id": f"heldout-{track}",
        "track": track,
        "target_stage": stage,
        "view_index": repeat,
        "task_definition_version": pack["task_definition_version"],
        "reward_contract": bat_reward.expected_reward_contract(pack, stage),
    }
    reply = chat(a.base_url, a.model, bat_sandbox.render_prompt(pack, extra), a.max_tokens, a.seed, a.timeout, a.send_tools)
    text = completion_text(reply["choices"][0]["message"])
    summary, evidence = bat_sandbox.run_rollout(pack, extra, text, a.tool_format)
    payload = bat_reward.score({**extra, "bat_agentic_summary": summary, "bat_sandbox_evidence": evidence})
    if "error" in payload:
        raise SystemExit(f"openai_eval: {track}/{stage}: the evidence did not score: {payload['error']}")
    tokens = (reply.get("usage") or {}).get("completion_tokens", 0)
    return payload["score"], evidence["artifacts"]["task_score"] * payload["gate_cap"], tokens


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--request", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--tool-format", default="hermes")
    ap.add_argument("--tracks", help="comma-separated subset of the pack's tracks")
    ap.add_argument("--max-tokens", type=int, default=192)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--pack")
    ap.add_argument("--send-tools", action="store_true", help="send the execute_code tool schema")
    a = ap.parse_args()

    pack = bat_reward.load_pack(a.pack)
    with open(a.request, encoding="utf-8") as f:
        request = json.load(f)
    if request.get("artifact_kind") != "bat_eval_request":
        raise SystemExit("openai_eval: --request is not a bat evaluation request")
    repeats = int(request.get("repeats", 1))
    tracks = a.tracks.split(",") if a.tracks else list(pack["tracks"])
    unknown = [t for t in tracks if t not in pack["tasks"]]
    if unknown:
        raise SystemExit(f"openai_eval: unknown tracks {unknown}")

    cells, tokens = [], 0
    for track in tracks:
        for repeat in range(repeats):
            stages, task = {}, 0.0
            for s in pack["stages"]:
                stages[s], t, n = episode(pack, a, track, repeat, s)
                tokens += n
                if s == pack["stages"][-1]:
                    task = t
            cells.append(
                {
                    "track": track,
                    "task_id": bat_reward.TASK_ID_PREFIX + track,
                    "repeat": repeat,
                    "valid": True,
                    "task_score": task,
                    "stages": stages,
                }
            )
    raw = {
        "schema_version": 1,
        "status": "complete",
        "protocol_id": request.get("protocol_id"),
        "cells": cells,
        "notes": {"harness": "openai_eval.py", "completion_tokens": tokens, "max_tokens": a.max_tokens},
    }
    d = os.path.dirname(os.path.abspath(a.output))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".raw-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(raw, f, sort_keys=True, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, a.output)
    print(f"openai_eval: {len(cells)} cells, {tokens} completion tokens -> {a.output}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
