"""Writing through the API: plain commits read back byte for byte with ids
that are the BLAKE3 of the bytes (checked with the `blake3` PyPI package,
an implementation independent of bat's), refs, and an audit attached to a
demo round."""

from __future__ import annotations

import json
import os
import random

import blake3
import pytest

import batledger as bat
from conftest import bat_json


def make_tree(root):
    rng = random.Random(7)
    files = {
        "weights.bin": rng.randbytes(3 << 20),  # several content-defined chunks
        "config.json": b'{"hidden": 64}\n',
        "empty.txt": b"",
        "sub/dir/notes.md": "r\u00e9sum\u00e9 \U0001f600\n".encode(),
    }
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return files


def test_commit_read_round_trip_with_blake3_ids(empty, tmp_path):
    src = tmp_path / "round-data"
    files = make_tree(src)
    ledger = bat.Ledger(empty)
    meta = {"run": "unit", "lr": 0.001, "fields": {"round": 1, "loss": 0.25}}
    out = ledger.commit(src, "first", metadata=meta, author="tester")
    assert out["commit"] == ledger.resolve("HEAD") == bat_json("-C", empty, "log")[0]["id"]
    listed = {f["path"]: f for f in ledger.files()}
    assert set(listed) == set(files)
    for rel, data in files.items():
        assert listed[rel]["id"] == blake3.blake3(data).hexdigest()
        assert listed[rel]["size"] == len(data)
        assert ledger.read("HEAD", rel) == data
    c = ledger.log()[0]
    assert (c.message, c.author, c.metadata) == ("first", "tester", meta)
    assert c.fields == {"round": 1, "loss": 0.25}


def test_second_commit_tag_branch(empty, tmp_path):
    src = tmp_path / "d"
    make_tree(src)
    ledger = bat.Ledger(empty)
    first = ledger.commit(src, "one")["commit"]
    (src / "config.json").write_bytes(b'{"hidden": 128}\n')
    second = ledger.commit(src, "two")["commit"]
    assert ledger.log()[0].parents == [first]
    assert ledger.tag("v1", first) == first
    assert ledger.branch("side", first) == first
    assert ledger.tags() == {"v1": first}
    assert ledger.branches() == {"main": second, "side": first}
    side = ledger.commit(src, "on side", branch="side")["commit"]
    assert ledger.resolve("side") == side and ledger.resolve("main") == second


def test_eval_attach_records_an_audit(demo_copy, tmp_path):
    ledger = bat.Ledger(demo_copy)
    # The round's own gating summary evaluates its candidate: a valid audit.
    summary = tmp_path / "summary.json"
    summary.write_bytes(ledger.read("r02", "candidate-eval/summary.json"))
    out = ledger.eval_attach("r02", summary, "audit-v1")
    assert out["audits"] == ledger.resolve("r02")
    assert out["checkpoint_check"]["status"] == "match"
    assert out["tag"].startswith("refs/tags/") and out["tag"][len("refs/tags/"):] in ledger.tags()
    row = [c for c in bat_json("-C", demo_copy, "log") if c["id"] == out["audits"]][0]
    assert "audit" in row


def test_commit_round_revalidates_a_checked_out_round(demo, tmp_path):
    # A round commit's tree is bat's own round layout: checked out and
    # committed into a new ledger, it goes through the same validation.
    src = bat.Ledger(demo)
    work = tmp_path / "r01"
    src.checkout("r01", work)
    assert bat.looks_like_round(work)
    dest = tmp_path / "new"
    from conftest import bat as cli

    cli("init", dest)
    out = bat.Ledger(dest).commit_round(work, code_repo=False)
    assert out["round_id"] == "r01"
    assert out["metadata"]["scores"] == src.log("r01", limit=1)[0].metadata["scores"]
