from typing import Any, Literal

from . import _native
from ._native import Commit as Commit
from ._native import Corrupt as Corrupt
from ._native import LedgerError as LedgerError
from ._native import NotFound as NotFound
from ._native import RoundRejected as RoundRejected
from ._native import code_provenance as code_provenance
from .recorder import Recorder as Recorder

__version__: str

def looks_like_round(path: Any) -> bool: ...

class Ledger(_native.Ledger):
    def rounds_frame(self, branch: str = "main", backend: Literal["pandas", "polars"] = "pandas") -> Any:
        """One row per round as a pandas (or polars) DataFrame."""
    def metrics_frame(self, branch: str = "main", backend: Literal["pandas", "polars"] = "pandas") -> Any:
        """One row per round, one column per custom metric (health.*, eval.track.*, eval.stage.*)."""
    def steps_frame(self, branch: str = "main", backend: Literal["pandas", "polars"] = "pandas") -> Any:
        """One row per trainer step (the {metrics} file), one column per step metric."""
    def arm_scores_frame(self, arms: str | list[str], resamples: int = 10000, seed: int = 0,
                         scheme: Literal["runs", "tasks"] = "runs",
                         backend: Literal["pandas", "polars"] = "pandas") -> Any:
        """Arm scores with bootstrap confidence intervals as a data frame."""
