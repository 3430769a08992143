"""Rounds as data: the shared round rows (bat/src/inspect/rounds.rs) through
the API, as records and as data frames."""

from __future__ import annotations

import json

import pytest

import batledger as bat
from conftest import bat_json


def test_rounds_frame_matches_bat_log(demo):
    ledger = bat.Ledger(demo)
    df = ledger.rounds_frame()
    assert len(df) == 10
    assert list(df.columns) == bat._native.round_columns()
    log = [c for c in bat_json("-C", demo, "log", "main") if c["metadata"].get("kind") == "bat_round"]
    by_round = {c["metadata"]["round_id"]: c for c in log}
    assert list(df["round_id"]) == [f"r{n:02d}" for n in range(1, 11)]
    for row in df.itertuples(index=False):
        c = by_round[row.round_id]
        assert row.overall == c["metadata"]["scores"]["overall"]
        assert row.commit == c["id"]
        assert row.gate_status == c["metadata"]["gate_status"]
        for s in ("S1", "S2", "S3", "S4", "S5"):
            assert getattr(row, s) == c["metadata"]["scores"][s]


def test_rounds_records_and_polars(demo):
    ledger = bat.Ledger(demo)
    rows = ledger.rounds("main")
    assert [r["round_id"] for r in rows] == [f"r{n:02d}" for n in range(1, 11)]
    assert set(rows[0]) == set(bat._native.round_columns())
    pl = pytest.importorskip("polars")
    frame = ledger.rounds_frame(backend="polars")
    assert isinstance(frame, pl.DataFrame)
    assert frame["overall"].to_list() == [r["overall"] for r in rows]
    with pytest.raises(ValueError):
        ledger.rounds_frame(backend="spark")


def test_metrics_are_the_health_file_numbers_and_the_eval_scores(demo):
    ledger = bat.Ledger(demo)
    records = ledger.metrics("main")
    rounds = ledger.rounds("main")
    assert {r["source"] for r in records} == {"health", "eval.track", "eval.stage"}
    df = ledger.metrics_frame("main")
    assert list(df["commit"]) == [r["commit"] for r in rounds]
    keys = list(df.columns[2:])
    assert keys[0].startswith("health.") and keys[-1] == "eval.stage.S5"
    for r in rounds:
        health = json.loads(ledger.read(r["commit"], "training-health.json"))
        assert df.loc[df["commit"] == r["commit"], "health.sim.kl_to_reference"].item() == health["sim"]["kl_to_reference"]
        for s in ("S1", "S2", "S3", "S4", "S5"):
            assert df.loc[df["commit"] == r["commit"], f"eval.stage.{s}"].item() == r[s]
    with pytest.raises(ValueError):
        ledger.metrics_frame(backend="spark")


def test_steps_frame_is_the_committed_step_metrics_file(demo):
    ledger = bat.Ledger(demo)
    df = ledger.steps_frame("main")
    assert list(df.columns[:5]) == bat.STEP_COLUMNS
    assert {"reward_mean", "kl", "tokens"} <= set(df.columns)
    rounds = ledger.rounds("main")
    assert set(df["commit"]) == {r["commit"] for r in rounds}
    last = rounds[-1]["commit"]
    lines = [json.loads(l) for l in ledger.read(last, "step-metrics.jsonl").splitlines() if l.strip()]
    mine = df[df["commit"] == last]
    assert list(mine["step"]) == [l["step"] for l in lines]
    assert list(mine["kl"]) == [l["kl"] for l in lines]


def test_arm_scores_frame_has_intervals_and_arm_groups(demo):
    ledger = bat.Ledger(demo)
    replay = [b for b in ledger.branches() if b.startswith("terminal/")][0]
    group = "main," + replay
    df = ledger.arm_scores_frame(["main", group], resamples=300)
    assert list(df.columns) == bat.ARM_SCORE_COLUMNS
    assert set(df["arm"]) == {"main", group} or len(set(df["arm"])) == 2
    per_round = df[(df["arm"] == "main") & (df["score"] == "overall") & df["round"].notna()]
    assert list(per_round["round"]) == list(range(1, 11))
    assert (per_round["ci_low"] <= per_round["mean"]).all()
    assert (per_round["mean"] <= per_round["ci_high"]).all()
    assert set(df["resamples"]) == {300} and set(df["scheme"]) == {"runs"}
    again = ledger.arm_scores_frame(["main", group], resamples=300)
    assert df.equals(again)
    # An arm group stands for its branches wherever a branch is named.
    rows = ledger.rounds(group)
    assert {r["branch"] for r in rows} == {"main", replay}
    with pytest.raises(bat.NotFound):
        ledger.rounds("nomatch/*")
