"""The BaT reward (contract section C.6) for Python trainers.

This is the Python port of `bat reward score` (contract/src/reward_score.rs);
tests/reward_cross.rs feeds both the same rows and requires byte-identical
payloads, error codes included. Standard library only.

Entry points:

* ``score(extra, mode="stage", pack=None)`` -> payload dict. ``extra`` is the
  row's ``extra_info`` carrying ``bat_agentic_summary`` and
  ``bat_sandbox_evidence`` (what one rollout did, see bat_sandbox.py).
* ``compute_score(data_source, solution_str, ground_truth, extra_info, **kw)``
  for VeRL's ``custom_reward_function``. When ``extra_info`` has no evidence
  yet, the tool calls in ``solution_str`` are executed in a sandbox first.
  ``reward_mode`` ("stage" or "terminal") comes from
  ``custom_reward_function.reward_kwargs``.
* ``BatReward(mode)``: a TRL ``reward_funcs`` callable.
* ``slime_rm(args, sample)``: Slime's ``--custom-rm-path`` entry.
* ``python3 bat_reward.py score FILE [--mode M] [--pack F]``: the CLI twin of
  ``bat reward score`` (one canonical-JSON payload per input line).

The pack (the benchmark's constants) is read from ``--pack``/``pack=``, else
``$BAT_PACK``, else the default pack shipped in this repository.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
from typing import Any

MODE_STAGE = "bat_core_rubric"
MODE_TERMINAL = "bat_terminal_outcome"
GATE_UNVERIFIED = "verified_execution_missing"
GATE_INVALID = "reward_evidence_invalid"
E2E = "E2E"
REQUIRED_OUTPUT = "outputs/submission.csv"
TASK_ID_PREFIX = "bat-core-"
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,255}")
_I64_MAX = 2**63 - 1

_HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PACK_PATH = os.path.join(_HERE, "..", "..", "contract", "src", "default_pack.json")
_PACKS: dict[str, dict] = {}


class Fail(Exception):
    """A scoring failure; the message is the payload's ``error`` code."""


def load_pack(path: str | None = None) -> dict:
    """The pack at ``path`` (else $BAT_PACK, else the default), cached."""
    path = path or os.environ.get("BAT_PACK") or DEFAULT_PACK_PATH
    path = os.path.abspath(path)
    if path not in _PACKS:
        with open(path, encoding="utf-8") as f:
            _PACKS[path] = json.load(f)
    return _PACKS[path]


def cj(value: Any) -> str:
    """Canonical compact JSON (contract A.2)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest(value: Any) -> str:
    return hashlib.sha256(cj(value).encode("utf-8")).hexdigest()


# -- reward contracts (C.6) and the task contract (C.4) ---------------------


def _items(k: dict, stage: str) -> list:
    return [{"id": i, "weight": 1.0} for i in k["reward_items"].get(stage, [])]


def expected_reward_contract(k: dict, stage: str) -> dict:
    if stage == E2E:
        return {
            "schema_version": 1,
            "mode": "bat_e2e_rubric",
            "target_stage": E2E,
            "stages": [
                {"id": s, "weight": k["stage_weights"].get(s), "items": _items(k, s)} for s in k["stages"]
            ],
            "stage_mean_weight": 0.5,
            "final_outcome_weight": 0.5,
            "verified_tool_execution_required": True,
        }
    if stage not in k["stages"]:
        raise Fail("stage_invalid")
    return {
        "schema_version": 1,
        "mode": "bat_stage_rubric",
        "target_stage": stage,
        "items": _items(k, stage),
        "aggregation": "equal_weight_mean",
        "verified_tool_execution_required": True,
    }


def _artifacts_before(k: dict, stage: str) -> list:
    if stage == E2E:
        return []
    out = []
    for s in k["stages"]:
        if s == stage:
            break
        out.extend(k["stage_required_artifacts"].get(s, []))
    return out


def _artifacts_of(k: dict, stage: str) -> list:
    if stage == E2E:
        return [a for s in k["stages"] for a in k["stage_required_artifacts"].get(s, [])]
    return list(k["stage_required_artifacts"].get(stage, []))


def task_contract(k: dict, extra: Any) -> dict:
    """The task contract of an ``extra_info``-like value, with contract_sha256."""
    if not isinstance(extra, dict):
        raise Fail("extra_info_invalid")
    state_id = extra.get("state_id")
    if not (isinstance(state_id, str) and _SAFE_ID.fullmatch(state_id)):
        raise Fail("state_id_invalid")
    source_state_id = extra.get("source_state_id")
    if not (isinstance(source_state_id, str) and _SAFE_ID.fullmatch(source_state_id)):
        raise Fail("source_state_id_invalid")
    track = extra.get("track")
    if not isinstance(track, str) or track.lower() not in k["tasks"]:
        raise Fail("track_unsupported")
    track = track.lower()
    stage = extra.get("target_stage")
    if not isinstance(stage, str) or (stage.upper() != E2E and stage.upper() not in k["stages"]):
        raise Fail("target_stage_unsupported")
    stage = stage.upper()
    view_index = extra.get("view_index")
    # bat keeps ints in i64; a larger view index cannot occur in a round.
    if isinstance(view_index, bool) or not isinstance(view_index, int) or not 0 <= view_index <= _I64_MAX:
        raise Fail("view_index_invalid")
    if extra.get("task_definition_version") != k["task_definition_version"] or not isinstance(
        extra.get("task_definition_version"), str
    ):
        raise Fail("task_definition_version_unsupported")
    t = k["tasks"][track]
    prefix = k.get("expected_id_prefix_by_track", {}).get(track, "test")
    c = {
        "schema_version": 3,
        "task_definition_version": k["task_definition_version"],
        "prompt_version": k["prompt_version"],
        "state_id": state_id,
        "source_state_id": source_state_id,
        "view_index": view_index,
        "task_id": TASK_ID_PREFIX + track,
        "task_name": t["task_name"],
        "track": track,
        "target_stage": stage,
        "objective": t["objective"],
        "inventory": list(t["inventory"]),
        "expected_ids": [f"{prefix}_{i:03d}" for i in range(k["expected_id_count"])],
        "required_output": REQUIRED_OUTPUT,
        "id_column": t["id_column"],
        "required_columns": list(t["required_columns"]),
        "output_kind": t["output_kind"],
        "allowed_values": t["allowed_values"],
        "agentic_budget": k["agentic_budget"],
        "provided_handoff_artifacts": _artifacts_before(k, stage),
        "current_required_artifacts": _artifacts_of(k, stage),
    }
    if "output_shape" in t:
        c["output_shape"] = t["output_shape"]
    try:
        c["contract_sha256"] = digest(c)
    except ValueError:
        raise Fail("task_contract_not_stable_json") from None
    return c


# -- runtime scoring (C.6) ---------------------------------------------------


def _target_of(extra: dict) -> str:
    # Python's `str(x or "").upper()`, limited to what a row can hold: falsy
    # values give "", a string its uppercase form, anything else is refused.
    t = extra.get("target_stage")
    if t is None or t is False:
        return ""
    if isinstance(t, str):
        return t.upper()
    if isinstance(t, bool):
        raise Fail("target_stage_invalid")
    if isinstance(t, (int, float)) and t == 0:
        return ""
    if isinstance(t, (list, dict)) and len(t) == 0:
        return ""
    raise Fail("target_stage_invalid")


def _count_of(summary: dict, key: str) -> int:
    # `int(x or 0)` restricted to numbers (strings are refused).
    v = summary.get(key)
    if v is None:
        return 0
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and math.isfinite(v) and abs(v) < 2.0**63:
        return int(v)
    raise Fail("agentic_summary_invalid")


def _digest_ok(m: dict, key: str) -> bool:
    rest = {k: v for k, v in m.items() if k != key}
    claimed = m.get(key)
    try:
        return isinstance(claimed, str) and claimed == digest(rest)
    except ValueError:
        return False


def _plain_sum(xs: list) -> float:
    # Left to right from 0.0 (CPython 3.11's sum(); 3.12 compensates).
    acc = 0.0
    for x in xs:
        acc += x
    return acc


def _stage_score(k: dict, checks: Any, stage: str) -> tuple:
    stage_checks = checks.get(stage) if isinstance(checks, dict) else None
    if not isinstance(stage_checks, dict):
        raise Fail("stage_evidence_missing")
    items = k["reward_items"].get(stage, [])
    if set(stage_checks) != set(items) or len(stage_checks) != len(items):
        raise Fail("stage_rubric_evidence_mismatch")
    if not items:
        raise Fail("stage_rubric_empty")
    scores = [(i, 1.0 if stage_checks[i] is True else 0.0) for i in items]
    return scores, _plain_sum([s for _, s in scores]) / len(scores)


def _task_score(artifacts: dict) -> float:
    x = artifacts.get("task_score")
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise Fail("task_score_invalid")
    if not 0 <= x <= 1:
        raise Fail("task_score_invalid")
    return float(x)


def _weight(k: dict, stage: str) -> float:
    w = k["stage_weights"].get(stage)
    return float(w) if isinstance(w, (int, float)) and not isinstance(w, bool) else 0.0


def _rubric(k: dict, artifacts: dict, target: str, mode: str) -> tuple:
    items: dict = {}
    stages: dict = {}
    if mode == "terminal":
        return _task_score(artifacts), items, stages
    checks = artifacts.get("checks")
    if target == E2E:
        weighted = []
        for s in k["stages"]:
            item_scores, score_s = _stage_score(k, checks, s)
            for i, v in item_scores:
                items[f"{s}.{i}"] = v
            stages[s] = score_s
            weighted.append(_weight(k, s) * score_s)
        stage_mean = _plain_sum(weighted)
        task = _task_score(artifacts)
        return 0.5 * stage_mean + 0.5 * task, items, stages
    item_scores, score_s = _stage_score(k, checks, target)
    for i, v in item_scores:
        items[i] = v
    stages[target] = score_s
    return score_s, items, stages


def _score_inner(k: dict, extra: Any, mode: str, target_box: list) -> dict:
    if not isinstance(extra, dict):
        raise Fail("extra_info_invalid")
    target = _target_of(extra)
    target_box.append(target)
    expected = expected_reward_contract(k, target)
    if "reward_contract" not in extra or extra["reward_contract"] != expected:
        raise Fail("reward_contract_mismatch")
    summary = extra.get("bat_agentic_summary")
    evidence = extra.get("bat_sandbox_evidence")
    if not isinstance(summary, dict) or not isinstance(evidence, dict):
        raise Fail("sandbox_evidence_missing")
    if not _digest_ok(summary, "summary_sha256"):
        raise Fail("agentic_summary_digest_invalid")
    if not _digest_ok(evidence, "evidence_sha256"):
        raise Fail("sandbox_evidence_digest_invalid")
    evidence_sha = evidence["evidence_sha256"]
    if summary.get("evidence_sha256") != evidence_sha or not isinstance(summary.get("evidence_sha256"), str):
        raise Fail("sandbox_summary_binding_invalid")
    contract_sha = task_contract(k, extra)["contract_sha256"]
    sandbox_contract = evidence.get("contract")
    if not isinstance(sandbox_contract, dict):
        raise Fail("sandbox_contract_missing")
    if sandbox_contract.get("contract_sha256") != contract_sha:
        raise Fail("sandbox_contract_mismatch")
    if summary.get("contract_sha256") != contract_sha:
        raise Fail("summary_contract_mismatch")
    artifacts = evidence.get("artifacts")
    if not isinstance(artifacts, dict):
        raise Fail("artifact_evidence_missing")
    raw, items, stages = _rubric(k, artifacts, target, mode)
    successful = _count_of(summary, "successful_tool_calls")
    changed = summary.get("workspace_changed") is True
    verified = successful > 0 and changed
    cap = 1.0 if verified else 0.0
    tool_calls = _count_of(summary, "tool_calls")
    return {
        "score": min(raw, cap),
        "raw_score": raw,
        "gate_cap": cap,
        "gate_reason": None if verified else GATE_UNVERIFIED,
        "mode": MODE_TERMINAL if mode == "terminal" else MODE_STAGE,
        "target_stage": target,
        "reward_version": k["reward_version"],
        "item_scores": items,
        "stage_scores": stages,
        "agentic_tool_calls": tool_calls,
        "agentic_successful_tool_calls": successful,
        "agentic_workspace_changed": changed,
        "agentic_current_stage_complete": summary.get("current_stage_complete") is True,
        "contract_sha256": contract_sha,
        "evidence_sha256": evidence_sha,
        "verified": True,
    }


def score(extra: Any, mode: str = "stage", pack: dict | None = None) -> dict:
    """Score one rollout; never raises for bad input (see the ``error`` key)."""
    if mode not in ("stage", "terminal"):
        raise ValueError(f"unknown reward mode {mode!r}: use stage or terminal")
    k = pack if pack is not None else load_pack()
    target_box: list = []
    try:
        return _score_inner(k, extra, mode, target_box)
    except Fail as e:
        return {
            "score": 0.0,
            "raw_score": 0.0,
            "gate_cap": 0.0,
            "gate_reason": GATE_INVALID,
            "mode": MODE_TERMINAL if mode == "terminal" else MODE_STAGE,
            "target_stage": target_box[0] if target_box else None,
            "reward_version": k["reward_version"],
            "item_scores": {},
            "stage_scores": {},
            "verified": False,
            "error": str(e),
        }


# -- trainer entry points ----------------------------------------------------


def _with_evidence(extra: dict, completion: str, tool_format: str, pack: dict) -> dict:
    """``extra`` plus the evidence of executing ``completion`` in a sandbox,
    unless the agent loop already attached it."""
    if "bat_agentic_summary" in extra and "bat_sandbox_evidence" in extra:
        return extra
    sys.path.insert(0, _HERE) if _HERE not in sys.path else None
    import bat_sandbox  # noqa: E402 (sibling module, imported on first use)

    summary, evidence = bat_sandbox.run_rollout(pack, extra, completion, tool_format)
    return {**extra, "bat_agentic_summary": summary, "bat_sandbox_evidence": evidence}


def compute_score(data_source, solution_str, ground_truth, extra_info=None, reward_mode="stage", **kwargs):
    """VeRL ``custom_reward_function`` entry (``name: compute_score``).

    Returns VeRL's dict form: ``score`` plus flat numeric diagnostics.
    """
    pack = load_pack(kwargs.get("pack_path"))
    extra = extra_info if isinstance(extra_info, dict) else {}
    if isinstance(extra.get("bat_extra_info_json"), str):
        # verl/prepare_data.py ships the row's extra_info as JSON text; evidence
        # an agent loop attached (tool_extra_fields) stays alongside it.
        attached = {k: extra[k] for k in ("bat_agentic_summary", "bat_sandbox_evidence") if k in extra}
        extra = {**json.loads(extra["bat_extra_info_json"]), **attached}
    tool_format = kwargs.get("tool_format") or os.environ.get("BAT_TOOL_FORMAT", "hermes")
    payload = score(_with_evidence(extra, solution_str or "", tool_format, pack), reward_mode, pack)
    return {
        "score": payload["score"],
        "raw_score": payload["raw_score"],
        "gate_cap": payload["gate_cap"],
        "evidence_valid": 1.0 if payload["verified"] else 0.0,
    }


async def slime_rm(args, sample, **kwargs):
    """Slime ``--custom-rm-path bat_reward.slime_rm`` (Slime awaits it).

    The row's ``extra_info`` is the sample's metadata (``--metadata-key
    extra_info``); the mode comes from ``$BAT_REWARD_MODE``. With
    ``$BAT_METER_FILE`` set, one line per scored sample (its measured
    ``response_length``) is appended there for the health file.
    """
    extra = sample.metadata if isinstance(sample.metadata, dict) else {}
    if isinstance(extra.get("bat_extra_info_json"), str):
        extra = json.loads(extra["bat_extra_info_json"])
    pack = load_pack()
    tool_format = os.environ.get("BAT_TOOL_FORMAT", "hermes")
    payload = score(
        _with_evidence(extra, sample.response or "", tool_format, pack), os.environ.get("BAT_REWARD_MODE", "stage"), pack
    )
    meter = os.environ.get("BAT_METER_FILE")
    if meter:
        with open(meter, "a", encoding="utf-8") as f:
            f.write(json.dumps({"response_length": int(sample.response_length or 0), "score": payload["score"]}) + "\n")
    return payload["score"]


def _completion_text(c: Any) -> str:
    # TRL passes strings for standard datasets and message lists for
    # conversational ones.
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(m.get("content") or "" for m in c if isinstance(m, dict))
    return ""


class BatReward:
    """A TRL ``reward_funcs`` callable: ``BatReward("stage")``.

    Reads the ``extra_info`` column of the batch; ``payloads`` keeps the last
    batch's payloads for logging (the health file counts errors from it).
    """

    def __init__(self, mode: str = "stage", tool_format: str = "hermes", pack_path: str | None = None):
        if mode not in ("stage", "terminal"):
            raise ValueError(f"unknown reward mode {mode!r}: use stage or terminal")
        self.mode = mode
        self.tool_format = tool_format
        self.pack = load_pack(pack_path)
        self.__name__ = f"bat_reward_{mode}"
        self.payloads: list = []

    def __call__(self, prompts=None, completions=None, extra_info=None, **kwargs) -> list:
        extras = extra_info or [{}] * len(completions or [])
        self.payloads = []
        out = []
        for c, e in zip(completions or [], extras):
            e = json.loads(e) if isinstance(e, str) else (e or {})
            p = score(_with_evidence(e, _completion_text(c), self.tool_format, self.pack), self.mode, self.pack)
            self.payloads.append(p)
            out.append(float(p["score"]))
        return out


def main(argv: list) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="bat_reward.py")
    sub = ap.add_subparsers(dest="verb", required=True)
    s = sub.add_parser("score", help="score JSONL extra_info lines like `bat reward score`")
    s.add_argument("file")
    s.add_argument("--mode", default="stage", choices=["stage", "terminal"])
    s.add_argument("--pack")
    a = ap.parse_args(argv)
    k = load_pack(a.pack)
    f = sys.stdin if a.file == "-" else open(a.file, encoding="utf-8")
    out = sys.stdout
    with f:
        for line in f:
            if not line.strip():
                continue
            out.write(cj(score(json.loads(line), a.mode, k)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
