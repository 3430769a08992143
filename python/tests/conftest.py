"""Fixtures of the batledger tests: the `bat` binary (BAT_BIN, set by
tests/python_api.rs to the binary cargo built), a demo campaign made by
`bat demo` once per session, and fresh ledgers made by `bat init`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def bat_bin() -> str:
    b = os.environ.get("BAT_BIN") or shutil.which("bat")
    if not b:
        pytest.fail("BAT_BIN is not set and no `bat` is on PATH")
    return b


def bat(*args: str, cwd=None, check: bool = True) -> subprocess.CompletedProcess:
    """Run the CLI; output as text."""
    p = subprocess.run([bat_bin(), *map(str, args)], cwd=cwd, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"bat {' '.join(map(str, args))} failed ({p.returncode}): {p.stderr}")
    return p


def bat_json(*args: str) -> object:
    return json.loads(bat("--json", *args).stdout)


@pytest.fixture(scope="session")
def demo(tmp_path_factory) -> Path:
    """A ledger holding `bat demo`'s 10-round campaign of one seed (branch
    main = bat/s0) and its ablation replay (terminal/s0). Read-only for the
    tests: writers copy it first."""
    d = tmp_path_factory.mktemp("demo") / "campaign"
    bat("demo", d, "--seeds", "1")
    return d


@pytest.fixture
def demo_copy(demo, tmp_path) -> Path:
    """A private copy of the demo ledger, for tests that write."""
    d = tmp_path / "campaign"
    shutil.copytree(demo, d, symlinks=True)
    return d


@pytest.fixture
def empty(tmp_path) -> Path:
    """A new empty ledger."""
    d = tmp_path / "ledger"
    bat("init", d)
    return d
