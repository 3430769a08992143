"""Execute what a policy emitted, in a throw-away workspace, and describe the
result as BaT reward evidence (``bat_agentic_summary`` and
``bat_sandbox_evidence``, contract section C.6).

The workspace is a fresh temporary directory seeded with the task's inventory
and the artifacts earlier stages hand over. Tool calls are parsed from the
completion in the runtime tool format (``hermes``: ``<tool_call>{"name": ...,
"arguments": {...}}</tool_call>``) and executed in order, at most the task
budget's ``max_tool_calls``. The one tool is the prompt's ``execute_code``
with exactly two fields, ``language`` (``bash`` or ``python``) and ``code``:
the code runs in a child process (``bash -c`` or this interpreter with
``-I -c``) with the workspace as working directory, a near-empty environment,
stdin closed and a wall-clock limit (``BAT_SANDBOX_TIMEOUT`` seconds,
default 5). A call succeeds when the child exits 0 in time.

This is a containment for a toy policy's output, not a security boundary: do
not point it at code you would not run on the machine anyway.

The rubric checks (one per reward item of the default pack) and the task score
are computed from the files the workspace holds afterwards. The task score is
structural: the fraction of expected ids that the submission answers with an
allowed value. Standard library only.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))) if os.path.dirname(
    os.path.abspath(__file__)
) not in sys.path else None
import bat_reward  # noqa: E402

TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)


def parse_tool_calls(text: str, tool_format: str) -> list:
    """The tool calls in ``text``: a list of (name, arguments) or None for a
    block that does not parse."""
    if tool_format != "hermes":
        raise ValueError(f"unsupported runtime tool format {tool_format!r} (this sandbox speaks hermes)")
    calls = []
    for block in TOOL_CALL.findall(text):
        try:
            v = json.loads(block.strip())
        except ValueError:
            calls.append(None)
            continue
        if isinstance(v, dict) and isinstance(v.get("name"), str) and isinstance(v.get("arguments"), dict):
            calls.append((v["name"], v["arguments"]))
        else:
            calls.append(None)
    return calls


def _seed_text(rel: str, contract: dict) -> str:
    # Placeholder content for inventory files and handed-over artifacts.
    if rel.endswith(".csv"):
        col = contract["id_column"]
        return col + "\n" + "\n".join(contract["expected_ids"]) + "\n"
    if rel.endswith(".json"):
        return json.dumps({"provided_by": "handoff", "path": rel}) + "\n"
    return f"# {rel}\n"


def seed_workspace(root: str, contract: dict) -> None:
    for rel in list(contract["inventory"]) + list(contract["provided_handoff_artifacts"]):
        if rel.endswith("/"):
            os.makedirs(os.path.join(root, rel), exist_ok=True)
            continue
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(_seed_text(rel, contract))


def tree_digest(root: str) -> str:
    h = hashlib.sha256()
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            p = os.path.join(d, name)
            h.update(os.path.relpath(p, root).encode() + b"\0")
            with open(p, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def execute(root: str, name: str, args: dict, timeout: float) -> bool:
    """Run one tool call; True when it succeeded."""
    if name != "execute_code" or set(args) != {"language", "code"}:
        return False
    code, language = args["code"], args["language"]
    if not isinstance(code, str) or language not in ("bash", "python"):
        return False
    argv = ["bash", "-c", code] if language == "bash" else [sys.executable, "-I", "-c", code]
    try:
        r = subprocess.run(
            argv,
            cwd=root,
            env={"PATH": "/usr/bin:/bin", "HOME": root, "LC_ALL": "C"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return False
    return r.returncode == 0


def _read(root: str, rel: str) -> str | None:
    try:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _json_object(root: str, rel: str) -> bool:
    text = _read(root, rel)
    try:
        return isinstance(json.loads(text), dict) if text is not None else False
    except ValueError:
        return False


def _csv_rows(root: str, rel: str) -> list | None:
    text = _read(root, rel)
    if text is None:
        return None
    try:
        return list(csv.DictReader(io.StringIO(text)))
    except csv.Error:
        return None


def _covers_ids(rows: list | None, contract: dict) -> bool:
    if not rows:
        return False
    got = {r.get(contract["id_column"]) for r in rows}
    return all(i in got for i in contract["expected_ids"])


def _answered(rows: list | None, contract: dict) -> float:
    """Fraction of expected ids with a row whose required columns are filled
    (and, where the pack lists allowed values, hold one of them)."""
    if not rows:
        return 0.0
    by_id = {}
    for r in rows:
        by_id.setdefault(r.get(contract["id_column"]), r)
    allowed = contract.get("allowed_values") or {}
    ok = 0
    for i in contract["expected_ids"]:
        r = by_id.get(i)
        if r is None:
            continue
        good = True
        for col in contract["required_columns"]:
            v = r.get(col)
            if v is None or v == "" or (col in allowed and allowed[col] and v not in allowed[col]):
                good = False
        ok += 1 if good else 0
    return ok / len(contract["expected_ids"])


def check_items(root: str, contract: dict) -> dict:
    """Every default-pack reward item, judged from the workspace files."""
    plan = _read(root, "plan/plan.md") or ""
    pilot = _csv_rows(root, "validation/pilot.csv")
    return {
        "plan_exists": plan.strip() != "",
        "pipeline_sections_present": sum(1 for ln in plan.splitlines() if ln.startswith("#")) >= 2,
        "environment_ready": _json_object(root, "setup/environment.json"),
        "compatibility_checked": _json_object(root, "setup/compatibility.json"),
        "model_loaded": _json_object(root, "setup/model_load.json"),
        "checkpoint_declared": _json_object(root, "model/checkpoint.json"),
        "pipeline_exists": (_read(root, "pipeline/infer.py") or "").strip() != "",
        "small_case_executed": bool(pilot) and contract["id_column"] in (pilot[0].keys() if pilot else ()),
        "validation_receipt_valid": _json_object(root, "validation/s3_validation.json"),
        "full_inference_complete": _covers_ids(_csv_rows(root, "outputs/predictions.csv"), contract),
        "completion_receipt_valid": _json_object(root, "validation/s4_completion.json"),
        "submission_complete": _covers_ids(_csv_rows(root, "outputs/submission.csv"), contract),
        "submission_receipt_valid": _json_object(root, "validation/s5_submission.json"),
    }


def stage_checks(pack: dict, items: dict, stage: str) -> dict:
    # An item this checker does not know is false, never silently true.
    return {i: items.get(i, False) is True for i in pack["reward_items"].get(stage, [])}


def run_rollout(pack: dict, extra: dict, completion: str, tool_format: str) -> tuple:
    """Execute ``completion`` for the row ``extra``; return (summary, evidence)
    with their digests, ready to attach to ``extra``."""
    contract = bat_reward.task_contract(pack, extra)
    stage = contract["target_stage"]
    timeout = float(os.environ.get("BAT_SANDBOX_TIMEOUT", "5"))
    budget = int(contract["agentic_budget"].get("max_tool_calls", 0))
    root = tempfile.mkdtemp(prefix="bat-sandbox-")
    try:
        seed_workspace(root, contract)
        before = tree_digest(root)
        calls = parse_tool_calls(completion, tool_format)[:budget]
        ok = sum(1 for c in calls if c is not None and execute(root, c[0], c[1], timeout))
        changed = tree_digest(root) != before
        items = check_items(root, contract)
        stages = pack["stages"] if stage == bat_reward.E2E else [stage]
        checks = {s: stage_checks(pack, items, s) for s in stages}
        task = _answered(_csv_rows(root, "outputs/submission.csv"), contract)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    evidence = {
        "schema_version": 1,
        "tool_format": tool_format,
        "contract": contract,
        "artifacts": {"checks": checks, "task_score": task},
    }
    evidence["evidence_sha256"] = bat_reward.digest(evidence)
    summary = {
        "schema_version": 1,
        "tool_calls": len(calls),
        "successful_tool_calls": ok,
        "workspace_changed": changed,
        "current_stage_complete": all(v for s in stages for v in checks[s].values()),
        "contract_sha256": contract["contract_sha256"],
        "evidence_sha256": evidence["evidence_sha256"],
    }
    summary["summary_sha256"] = bat_reward.digest(summary)
    return summary, evidence


def _quote(text: str) -> str:
    # Single-quoted for bash; the artifacts' text holds no single quote.
    assert "'" not in text
    return "'" + text + "'"


def demonstration(pack: dict, extra: dict) -> str:
    """A correct completion for the row (hermes format): one bash
    ``execute_code`` call creating the target stage's artifacts. The
    supervised warm-up teaches the base model this shape."""
    contract = bat_reward.task_contract(pack, extra)
    dirs = sorted({os.path.dirname(r) for r in contract["current_required_artifacts"] if os.path.dirname(r)})
    lines = ["mkdir -p " + " ".join(dirs)] if dirs else []
    for rel in contract["current_required_artifacts"]:
        if rel.endswith(".md"):
            content = "# Plan\\n# Steps\\n"
        elif rel.endswith(".json"):
            content = '{"ok":1}\\n'
        elif rel.endswith(".py"):
            content = "print(1)\\n"
        else:
            cols = contract["required_columns"]
            allowed = contract.get("allowed_values") or {}
            rows = [",".join(cols)] + [
                ",".join(i if c == contract["id_column"] else (allowed.get(c) or ["x"])[0] for c in cols)
                for i in contract["expected_ids"]
            ]
            content = "\\n".join(rows) + "\\n"
        lines.append(f"printf {_quote(content)} > {rel}")
    call = {"name": "execute_code", "arguments": {"language": "bash", "code": "; ".join(lines)}}
    return "<tool_call>" + json.dumps(call) + "</tool_call>"


def render_prompt(pack: dict, extra: dict) -> list:
    """The row's chat prompt (contract section C.5), for evaluators that
    build their own task rows."""
    c = bat_reward.task_contract(pack, extra)
    stage = c["target_stage"]
    budget = pack["agentic_budget"]
    values = {
        "state_id": c["state_id"],
        "track": c["track"],
        "task_id": c["task_id"],
        "task_name": c["task_name"],
        "objective": c["objective"],
        "stage": stage,
        "stage_display_name": pack["stage_display_names"].get(stage, ""),
        "required_output": c["required_output"],
        "id_column": c["id_column"],
        "required_columns_joined_comma_space": ", ".join(c["required_columns"]),
        "provided_joined_comma_space": ", ".join(c["provided_handoff_artifacts"]),
        **{key: str(budget[key]) for key in budget if key.startswith("max_")},
    }

    def fill(t: str) -> str:
        return re.sub(r"\{([a-z_]+)\}", lambda m: values.get(m.group(1), m.group(0)), t)

    lines = []
    for entry in pack["prompt"]["user_template"]:
        if isinstance(entry, str):
            lines.append(fill(entry))
        elif "each" in entry:
            items = c["inventory"] if entry["each"] == "inventory" else c[entry["each"]]
            lines.extend(entry["line"].replace("{item}", i) for i in items)
        elif entry.get("choose") == "handoff":
            empty = not c["provided_handoff_artifacts"]
            lines.append(fill(entry["when_no_provided_artifacts"] if empty else entry["otherwise"]))
        elif entry.get("choose") == "scope":
            lines.append(fill(entry["when_stage_is_E2E"] if stage == bat_reward.E2E else entry["otherwise"]))
    return [
        {"role": "system", "content": pack["prompt"]["system"]},
        {"role": "user", "content": "\n".join(lines)},
    ]
