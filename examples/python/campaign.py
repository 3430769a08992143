"""A campaign at a glance: Overall and S1-S5 per round, from a bat ledger.

    python examples/python/campaign.py LEDGER [--branch main] [--out campaign.png]

Notebook-style: open the ledger with the Python API, take the rounds as a
pandas DataFrame (one row per round, the columns of docs/rounds.md), print
it, and plot the gating Overall score and the five stage scores per round
with matplotlib, marking the rounds the gate promoted. Needs `batledger`
(python/), pandas and matplotlib. To get a ledger to look at:
`bat demo DIR` records a 10-round simulator campaign on `main`.
"""

from __future__ import annotations

import argparse

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402

import batledger as bat  # noqa: E402

STAGES = ["S1", "S2", "S3", "S4", "S5"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ledger", help="the ledger folder (or a folder below it)")
    ap.add_argument("--branch", default="main")
    ap.add_argument("--out", default="campaign.png", help="the PNG to write")
    a = ap.parse_args()

    ledger = bat.Ledger(a.ledger)
    df = ledger.rounds_frame(a.branch)
    if df.empty:
        raise SystemExit(f"no round commits on {a.branch}")
    print(df[["round_id", "target_stage", "gate_status", "overall", *STAGES]].to_string(index=False))

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    x = df["round_number"]
    for s in STAGES:
        ax.plot(x, df[s], marker=".", linewidth=1, alpha=0.8, label=s)
    ax.plot(x, df["overall"], color="black", linewidth=2.5, marker="o", label="Overall")
    promoted = df[df["gate_status"] == "promote"]
    ax.scatter(promoted["round_number"], promoted["overall"], s=140, facecolors="none",
               edgecolors="tab:green", linewidths=1.5, label="promoted", zorder=3)
    labels = [f"{r}\n{t}" for r, t in zip(df["round_id"], df["target_stage"].fillna("-"))]
    ax.set_xticks(list(x), labels)
    ax.set_xlabel("round / target stage")
    ax.set_ylabel("score")
    ax.set_title(f"{a.branch}: Overall and stage scores per round")
    ax.grid(alpha=0.3)
    ax.legend(ncol=4, fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
