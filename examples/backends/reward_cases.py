"""Write the reward cross-check corpus: one ``extra_info`` per line, covering
every track x stage with real sandbox evidence (a correct and an empty
rollout) and one or more broken variants per error code of the scorer.

    python3 reward_cases.py OUT.jsonl

tests/reward_cross.rs scores the file with `bat reward score` and with
bat_reward.py and requires identical bytes. Standard library only.
"""

from __future__ import annotations

import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bat_reward as R  # noqa: E402
import bat_sandbox as S  # noqa: E402


def base(k: dict, track: str, stage: str, n: int) -> dict:
    return {
        "state_id": f"cross-{track}-{stage}-{n}",
        "source_state_id": f"src-{track}-{n}",
        "track": track,
        "target_stage": stage,
        "view_index": n,
        "task_definition_version": k["task_definition_version"],
        "reward_contract": R.expected_reward_contract(k, stage),
    }


def attach(k: dict, extra: dict, completion: str) -> dict:
    summary, evidence = S.run_rollout(k, extra, completion, "hermes")
    return {**extra, "bat_agentic_summary": summary, "bat_sandbox_evidence": evidence}


def reseal(e: dict) -> dict:
    """Recompute the digests after an edit, so that a later check fails."""
    ev = e["bat_sandbox_evidence"]
    ev.pop("evidence_sha256", None)
    ev["evidence_sha256"] = R.digest(ev)
    su = e["bat_agentic_summary"]
    su["evidence_sha256"] = ev["evidence_sha256"]
    su.pop("summary_sha256", None)
    su["summary_sha256"] = R.digest(su)
    return e


def variants(k: dict, good: dict) -> list:
    out = []

    def edit(fn, seal=True):
        e = copy.deepcopy(good)
        fn(e)
        out.append(reseal(e) if seal else e)

    ev = "bat_sandbox_evidence"
    su = "bat_agentic_summary"
    edit(lambda e: e.update(target_stage=5), seal=False)  # target_stage_invalid
    edit(lambda e: e.update(target_stage=True), seal=False)
    edit(lambda e: e.update(target_stage=0), seal=False)  # "" -> stage_invalid
    edit(lambda e: e.pop("target_stage"), seal=False)
    edit(lambda e: e.update(target_stage="S9"), seal=False)
    edit(lambda e: e.update(target_stage=e["target_stage"].lower()), seal=False)  # still valid
    edit(lambda e: e.pop("reward_contract"), seal=False)
    edit(lambda e: e["reward_contract"].update(schema_version=2), seal=False)
    edit(lambda e: e["reward_contract"].update(schema_version=1.0), seal=False)  # Python ==: still equal
    edit(lambda e: e.pop(su), seal=False)
    edit(lambda e: e.update({ev: []}), seal=False)
    edit(lambda e: e[su].update(tool_calls=99), seal=False)  # agentic_summary_digest_invalid
    edit(lambda e: e[su].update(summary_sha256=7), seal=False)
    edit(lambda e: e[su].update(tool_calls=float("nan")), seal=False)  # digest cannot be computed
    edit(lambda e: e[ev]["artifacts"].update(task_score=0.25), seal=False)  # evidence digest
    edit(lambda e: e[ev].pop("evidence_sha256"), seal=False)

    def rebind(e):
        reseal(e)
        e[su]["evidence_sha256"] = "0" * 64
        e[su].pop("summary_sha256")
        e[su]["summary_sha256"] = R.digest(e[su])

    e = copy.deepcopy(good)
    rebind(e)
    out.append(e)  # sandbox_summary_binding_invalid
    edit(lambda e: e.update(state_id="bad id"))
    edit(lambda e: e.update(source_state_id=""))
    edit(lambda e: e.update(track="xray"))
    edit(lambda e: e.update(track=e["track"].upper()))  # still valid
    edit(lambda e: e.update(view_index=-1))
    edit(lambda e: e.update(view_index=True))
    edit(lambda e: e.update(view_index=1.0))
    edit(lambda e: e.update(task_definition_version="other"))
    edit(lambda e: e[ev].pop("contract"))
    edit(lambda e: e[ev].update(contract="x"))
    edit(lambda e: e[ev]["contract"].update(contract_sha256="f" * 64))
    edit(lambda e: e[su].update(contract_sha256="f" * 64))
    edit(lambda e: e[ev].pop("artifacts"))
    edit(lambda e: e[ev]["artifacts"].pop("checks"))
    edit(lambda e: e[ev]["artifacts"].update(checks=[]))
    stage = good["target_stage"]
    first = k["stages"][0] if stage == R.E2E else stage
    edit(lambda e: e[ev]["artifacts"]["checks"].pop(first))
    edit(lambda e: e[ev]["artifacts"]["checks"][first].update(extra_item=True))
    edit(lambda e: e[ev]["artifacts"]["checks"][first].popitem())
    edit(lambda e: e[ev]["artifacts"]["checks"][first].update({k["reward_items"][first][0]: 1}))  # 0.0, not error
    for ts in (True, 1.5, -0.0, 1, 0, "0.5", None, 2**70):
        edit(lambda e, ts=ts: e[ev]["artifacts"].update(task_score=ts))
    edit(lambda e: e[ev]["artifacts"].pop("task_score"))
    for n in ("3", 2.7, -1, True, None, [1], 1e300, 0):
        edit(lambda e, n=n: e[su].update(successful_tool_calls=n))
    edit(lambda e: e[su].update(tool_calls="many"))
    edit(lambda e: e[su].update(workspace_changed=1))
    edit(lambda e: e[su].update(current_stage_complete="yes"))
    return out


def main(path: str) -> None:
    k = R.load_pack()
    rows = ["[1,2]", '"text"', "null", "42", "{}"]
    n = 0
    for track in k["tracks"]:
        for stage in list(k["stages"]) + [R.E2E]:
            extra = base(k, track, stage, n)
            n += 1
            good = attach(k, extra, S.demonstration(k, extra))
            rows.append(R.cj(good))
            rows.append(R.cj(attach(k, extra, "no tool call here")))
            if track in ("vqa", "segmentation"):
                rows.extend(json.dumps(v, sort_keys=True) for v in variants(k, good))
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
