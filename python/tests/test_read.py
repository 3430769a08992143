"""Reading a `bat demo` ledger through the API, checked against the CLI's
JSON output of the same ledger."""

from __future__ import annotations

import batledger as bat
from conftest import bat as cli
from conftest import bat_json


def test_walks_up_like_the_cli(demo):
    deep = demo / "nested" / "deeper"
    deep.mkdir(parents=True)
    ledger = bat.Ledger(deep)
    assert ledger.resolve("HEAD") == bat.Ledger(demo).resolve("HEAD")
    assert ledger.head == "main"


def test_log_matches_bat_log_json(demo):
    ledger = bat.Ledger(demo)
    ours = ledger.log()
    theirs = bat_json("-C", demo, "log")
    assert [c.id for c in ours] == [c["id"] for c in theirs]
    for c, t in zip(ours, theirs):
        assert (c.parents, c.tree, c.message, c.time, c.author) == (
            t["parents"], t["tree"], t["message"], t["time"], t["author"])
        assert c.metadata == t["metadata"]
        assert c.fields == t["fields"]
    assert [c.id for c in ledger.log("r03", limit=2)] == [t["id"] for t in bat_json("-C", demo, "log", "r03", "-n", "2")]


def test_show_files_read_checkout(demo, tmp_path):
    ledger = bat.Ledger(demo)
    shown = ledger.show("r02")
    assert shown == bat_json("-C", demo, "show", "r02")
    files = ledger.files("r02")
    assert sorted(f["path"] for f in files) == sorted(
        [f["path"] for f in shown["files"]] + [s["path"] for s in shown["symlinks"]])
    gate = ledger.read("r02", "gate.json")
    assert gate == cli("-C", demo, "cat", "r02:gate.json").stdout.encode()
    out = ledger.checkout("r02", tmp_path / "co")
    assert out["commit"] == ledger.resolve("r02")
    assert (tmp_path / "co" / "gate.json").read_bytes() == gate
    for f in shown["files"]:
        assert (tmp_path / "co" / f["path"]).stat().st_size == f["size"]


def test_diff_is_bat_diff_json(demo):
    ledger = bat.Ledger(demo)
    assert ledger.diff("r01", "r02") == bat_json("-C", demo, "diff", "r01", "r02")
    only = ledger.diff("r01", "r03", sections=["gate", "eval"])
    assert set(only) == {"a", "b", "gate", "eval"}


def test_stats_refs_resolve(demo):
    ledger = bat.Ledger(demo)
    assert ledger.stats() == bat_json("-C", demo, "stats")
    branches = bat_json("-C", demo, "branch")["branches"]
    assert ledger.branches() == {b["name"]: b["commit"] for b in branches}
    assert ledger.tags() == {t["name"]: t["commit"] for t in bat_json("-C", demo, "tag")}
    r05 = [c for c in bat_json("-C", demo, "log") if c["metadata"].get("round_id") == "r05"]
    assert ledger.resolve("r05") == r05[0]["id"]
