"""Convert bat's round view (train.jsonl) into the parquet VeRL reads.

    python3 prepare_data.py train.jsonl out.parquet

Per row: ``data_source`` "bat", the chat ``prompt``, ``ability``,
``reward_model`` {"style": "custom", "ground_truth": ""} and an
``extra_info`` whose nested members travel as JSON text
(``bat_extra_info_json``): stage and E2E rows have differently shaped
reward contracts, and Arrow would otherwise merge them into one struct
padded with nulls, which then no longer equal the expected contract.
``agent_name`` "tool_agent" and ``tools_kwargs`` hand the row to the
execute_code tool (bat_tool.py).
"""

from __future__ import annotations

import json
import sys


def convert(rows: list) -> list:
    out = []
    for i, r in enumerate(rows):
        extra = r["extra_info"]
        text = json.dumps(extra, sort_keys=True, ensure_ascii=False)
        out.append(
            {
                "data_source": "bat",
                "prompt": r["prompt"],
                "ability": r.get("ability", "bat"),
                "reward_model": {"style": "custom", "ground_truth": ""},
                "agent_name": "tool_agent",
                "extra_info": {
                    "index": i,
                    "state_id": extra.get("state_id"),
                    "target_stage": extra.get("target_stage"),
                    "bat_extra_info_json": text,
                    "tools_kwargs": {"execute_code": {"create_kwargs": {"bat_extra_info_json": text}}},
                },
            }
        )
    return out


def main(src: str, dst: str) -> None:
    import pandas as pd

    with open(src, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    pd.DataFrame(convert(rows)).to_parquet(dst)
    print(f"prepare_data: {len(rows)} rows -> {dst}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
