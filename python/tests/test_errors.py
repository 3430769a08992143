"""One failure per exception class, each with the CLI's message and hint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import batledger as bat
from conftest import bat as cli


def cli_error(*args) -> str:
    p = cli(*args, check=False)
    assert p.returncode != 0
    return p.stderr


def test_not_found(demo, tmp_path):
    with pytest.raises(bat.NotFound) as e:
        bat.Ledger(tmp_path)
    assert "bat init" in str(e.value)
    ledger = bat.Ledger(demo)
    with pytest.raises(bat.NotFound) as e:
        ledger.resolve("no-such-branch")
    err = e.value
    assert isinstance(err, bat.LedgerError)
    stderr = cli_error("-C", demo, "log", "no-such-branch")
    assert f"error: {err.message}" in stderr
    assert err.hints and all(f"hint: {h}" in stderr for h in err.hints)
    with pytest.raises(bat.NotFound):
        ledger.read("r01", "no/such/file")


def test_corrupt(empty, tmp_path):
    src = tmp_path / "d"
    src.mkdir()
    data = bytes(range(256)) * 4096  # 1 MiB, compressible
    (src / "f.bin").write_bytes(data)
    ledger = bat.Ledger(empty)
    ledger.commit(src, "x")
    packs = sorted(Path(ledger.path).rglob("*.pack"), key=lambda p: p.stat().st_size)
    biggest = packs[-1]
    raw = bytearray(biggest.read_bytes())
    mid = len(raw) // 2
    raw[mid : mid + 64] = bytes(b ^ 0xFF for b in raw[mid : mid + 64])
    biggest.write_bytes(bytes(raw))
    fresh = bat.Ledger(empty)
    with pytest.raises(bat.Corrupt) as e:
        fresh.read("HEAD", "f.bin")
    assert "bat fsck" in str(e.value)


def test_round_rejected(demo, tmp_path):
    ledger = bat.Ledger(demo)
    work = tmp_path / "r03"
    ledger.checkout("r03", work)
    gate = json.loads((work / "gate.json").read_text())
    gate["status"] = "hold" if gate.get("status") == "promote" else "promote"
    (work / "gate.json").write_text(json.dumps(gate))
    dest = tmp_path / "new"
    cli("init", dest)
    with pytest.raises(bat.RoundRejected) as e:
        bat.Ledger(dest).commit_round(work, code_repo=False)
    stderr = cli_error("-C", dest, "commit", work, "--no-code-repo")
    assert f"error: {e.value.message}" in stderr
    assert bat.Ledger(dest).branches() == {}  # nothing was written
    with pytest.raises(bat.RoundRejected):
        ledger.eval_attach("r01", work / "candidate-eval" / "summary.json", "p1", role="gating")


def test_base_class_only(empty, tmp_path):
    src = tmp_path / "d"
    src.mkdir()
    (src / "a").write_bytes(b"a")
    ledger = bat.Ledger(empty)
    ledger.commit(src, "x")
    ledger.tag("v1")
    with pytest.raises(bat.LedgerError) as e:
        ledger.tag("v1")
    assert type(e.value) is bat.LedgerError
    assert e.value.message in cli_error("-C", empty, "tag", "v1")
