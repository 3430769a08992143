"""Python API of bat, the reproducibility ledger for Benchmark-as-Teacher
curriculum RL post-training.

The distribution and module are named ``batledger`` because ``bat`` on PyPI
is an unrelated package (Zeek log analysis tools, which also install a
top-level ``bat`` module). Import it as::

    import batledger as bat

    ledger = bat.Ledger("path/to/campaign")
    for c in ledger.log(limit=5):
        print(c.id[:12], c.metadata.get("round_id"), c.message)
    frame = ledger.rounds_frame()            # pandas DataFrame, one row per round

Everything that touches the ledger runs in Rust with the GIL released.
Errors are :class:`LedgerError` (base), :class:`NotFound`, :class:`Corrupt`
and :class:`RoundRejected`, with the message and hints ``bat`` prints.
"""

from __future__ import annotations

from typing import Any

from . import _native
from ._native import Commit, Corrupt, LedgerError, NotFound, RoundRejected, code_provenance
from .recorder import Recorder

__version__: str = _native.__version__

__all__ = [
    "Commit",
    "Corrupt",
    "Ledger",
    "LedgerError",
    "NotFound",
    "Recorder",
    "RoundRejected",
    "code_provenance",
    "looks_like_round",
]


def looks_like_round(path: Any) -> bool:
    """Whether ``path`` has a round directory's layout (``data/manifest.json``,
    ``candidate-eval/``, ``gate.json``): the test ``bat commit`` uses to pick
    round validation over a plain commit."""
    return _native.looks_like_round(path)


class Ledger(_native.Ledger):
    """A bat ledger, found from ``path`` upwards as the CLI does.

    Reading: :meth:`log`, :meth:`show`, :meth:`files`, :meth:`read`,
    :meth:`checkout`, :meth:`diff`, :meth:`stats`, :meth:`branches`,
    :meth:`tags`, :meth:`resolve`, :meth:`rounds`, :meth:`rounds_frame`,
    :meth:`metrics`, :meth:`metrics_frame`, :meth:`steps`, :meth:`steps_frame`,
    :meth:`arm_scores`,
    :meth:`arm_scores_frame`. Where a branch is named for data, an arm group
    (a glob such as ``"bat/*"`` or a comma list) stands for its branches.
    Writing: :meth:`commit`, :meth:`commit_round`, :meth:`eval_attach`,
    :meth:`tag`, :meth:`branch`.
    """

    def rounds_frame(self, branch: str = "main", backend: str = "pandas") -> Any:
        """:meth:`rounds` as a data frame, one row per round in campaign order,
        columns in the documented order (docs/rounds.md). ``backend`` is
        ``"pandas"`` (default) or ``"polars"``; the library is imported only
        here, so neither is a dependency of ``batledger`` itself."""
        columns = _native.round_columns()
        rows = self.rounds(branch)
        if backend == "pandas":
            import pandas as pd

            return pd.DataFrame.from_records(rows, columns=columns)
        if backend == "polars":
            import polars as pl

            return pl.DataFrame({c: [r.get(c) for r in rows] for c in columns})
        raise ValueError(f"unknown backend {backend!r}: choose 'pandas' or 'polars'")

    def arm_scores_frame(self, arms: Any, resamples: int = 10_000, seed: int = 0,
                         scheme: str = "runs", backend: str = "pandas") -> Any:
        """:meth:`arm_scores` as a data frame: one row per arm and score, per
        round (``round`` 1, 2, …: Overall and the audit gap) and at the final
        checkpoint (``round`` missing: every score), plus ``audit_gap_slope``;
        ``mean``, ``ci_low``, ``ci_high`` and the bootstrap that made them
        (``scheme``, ``resamples``, ``seed``, ``level``). ``arms`` is one arm or
        a list of arms; each is a branch, a glob such as ``"bat/*"`` or a comma
        list, and a group's branches are its seeds."""
        if isinstance(arms, str):
            arms = [arms]
        records = self.arm_scores(list(arms), resamples, seed, scheme)
        return _frame(records, ARM_SCORE_COLUMNS, backend)

    def metrics_frame(self, branch: str = "main", backend: str = "pandas") -> Any:
        """:meth:`metrics` as a data frame: one row per round that has any
        metric, in campaign order, with columns ``commit``, ``round_id`` and
        then one per metric key in ``bat export``'s order (``health.<path>``,
        ``eval.track.<name>``, ``eval.stage.<S>``); missing values are None."""
        records = self.metrics(branch)
        order: list[str] = []
        table: dict[str, dict[str, Any]] = {}
        for r in records:
            row = table.get(r["commit"])
            if row is None:
                order.append(r["commit"])
                row = table[r["commit"]] = {"commit": r["commit"], "round_id": r["round_id"]}
            row[r["key"]] = r["value"]
        columns = ["commit", "round_id"] + sorted({r["key"] for r in records}, key=_metric_order)
        if backend == "pandas":
            import pandas as pd

            return pd.DataFrame.from_records([table[c] for c in order], columns=columns)
        if backend == "polars":
            import polars as pl

            return pl.DataFrame({k: [table[c].get(k) for c in order] for k in columns})
        raise ValueError(f"unknown backend {backend!r}: choose 'pandas' or 'polars'")

    def steps_frame(self, branch: str = "main", backend: str = "pandas") -> Any:
        """:meth:`steps` as a data frame: one row per trainer step in campaign
        order, columns ``branch``, ``round_id``, ``round_number``, ``commit``,
        ``step`` and then one per metric name, sorted (docs/backends.md,
        ``{metrics}``); missing values are None."""
        records = self.steps(branch)
        names = sorted({k for r in records for k in r} - set(STEP_COLUMNS))
        return _frame(records, STEP_COLUMNS + names, backend)


STEP_COLUMNS = ["branch", "round_id", "round_number", "commit", "step"]


def _frame(records: list[dict[str, Any]], columns: list[str], backend: str) -> Any:
    if backend == "pandas":
        import pandas as pd

        return pd.DataFrame.from_records(records, columns=columns)
    if backend == "polars":
        import polars as pl

        return pl.DataFrame({c: [r.get(c) for r in records] for c in columns})
    raise ValueError(f"unknown backend {backend!r}: choose 'pandas' or 'polars'")


ARM_SCORE_COLUMNS = [
    "arm", "members", "round", "round_ids", "score", "mean", "ci_low", "ci_high",
    "iqm", "runs", "scheme", "resamples", "seed", "level",
]


def _metric_order(key: str) -> tuple[int, str]:
    """``bat export``'s metric column order: health, tracks, stages, each by name."""
    for i, prefix in enumerate(("health.", "eval.track.", "eval.stage.")):
        if key.startswith(prefix):
            return (i, key[len(prefix):])
    return (3, key)
