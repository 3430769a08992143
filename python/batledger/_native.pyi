"""Type stubs of the Rust core (``batledger._native``)."""

from os import PathLike
from pathlib import Path
from typing import Any, Literal, Optional, Sequence, Union

_Path = Union[str, PathLike[str]]

__version__: str

class LedgerError(Exception):
    """Base class of every error bat reports."""

    message: str
    hints: list[str]

class NotFound(LedgerError):
    """No ledger, revision, ref or path of that name."""

class Corrupt(LedgerError):
    """Stored data failed verification or is missing."""

class RoundRejected(LedgerError):
    """A round directory or audit summary was refused; nothing was written."""

class Commit:
    """One commit of the history."""

    @property
    def id(self) -> str: ...
    @property
    def parents(self) -> list[str]: ...
    @property
    def tree(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def time(self) -> int:
        """Unix seconds."""
    @property
    def author(self) -> str: ...
    @property
    def metadata(self) -> Any:
        """The commit metadata (a dict for rounds), as ``bat log --json``."""
    @property
    def fields(self) -> dict[str, Any]:
        """Indexed fields (``round_id``, ``scores.overall``, ...)."""

class Ledger:
    """A bat ledger, found from ``path`` upwards as the CLI does."""

    def __init__(self, path: _Path = ".") -> None: ...
    @property
    def path(self) -> Path:
        """The ledger's ``.bat`` directory."""
    @property
    def head(self) -> Optional[str]:
        """The branch HEAD is on (None when detached)."""
    def resolve(self, rev: str) -> str:
        """Full commit id of a branch, tag, HEAD, round id (``r02``) or prefix."""
    def log(self, rev: str = "HEAD", limit: Optional[int] = None) -> list[Commit]:
        """History from ``rev``, newest first."""
    def show(self, rev: str = "HEAD") -> dict[str, Any]:
        """A commit with metadata and files (``bat show --json``)."""
    def files(self, rev: str = "HEAD") -> list[dict[str, Any]]:
        """``path``, ``id`` (BLAKE3), ``size``, ``mode`` of every file."""
    def read(self, rev: str, path: str) -> bytes:
        """One file's bytes, verified."""
    def checkout(self, rev: str, to: _Path) -> dict[str, Any]:
        """Write a commit's files into a new or empty folder."""
    def diff(self, a: str, b: str, sections: Optional[Sequence[str]] = None) -> dict[str, Any]:
        """The sections of ``bat diff --json``."""
    def stats(self) -> dict[str, Any]:
        """Object counts and sizes (``bat stats --json``)."""
    def branches(self) -> dict[str, str]:
        """Local branches: name to commit id."""
    def tags(self) -> dict[str, str]:
        """Tags: name to commit id."""
    def rounds(self, branch: str = "main") -> list[dict[str, Any]]:
        """One record per round of ``branch`` in campaign order (docs/rounds.md)."""
    def arm_scores(self, arms: list[str], resamples: int = 10000, seed: int = 0,
                   scheme: str = "runs") -> list[dict[str, Any]]:
        """Arm scores with bootstrap confidence intervals (bat export --ci)."""
    def metrics(self, branch: str = "main") -> list[dict[str, Any]]:
        """Custom metrics of each round, long form (bat query's ``metrics`` table)."""
    def steps(self, branch: str = "main") -> list[dict[str, Any]]:
        """Step metrics of each round, one record per step (bat export --steps)."""
    def tag(self, name: str, rev: str = "HEAD") -> str: ...
    def branch(self, name: str, rev: str = "HEAD") -> str: ...
    def commit(
        self,
        dir: _Path,
        message: str,
        metadata: Any = None,
        branch: Optional[str] = None,
        author: Optional[str] = None,
    ) -> dict[str, Any]:
        """Record a folder as a plain commit; ``metadata["fields"]`` scalars are indexed."""
    def commit_round(
        self,
        round_dir: _Path,
        message: Optional[str] = None,
        branch: Optional[str] = None,
        code_repo: Union[_Path, Literal[False], None] = None,
        baseline_summary: Optional[_Path] = None,
        pack: Optional[_Path] = None,
        heldout_markers: Optional[_Path] = None,
        keep_raw_eval: bool = False,
        author: Optional[str] = None,
    ) -> dict[str, Any]:
        """Validate and record a round directory (``bat commit ROUND_DIR``)."""
    def eval_attach(
        self,
        rev: str,
        summary: _Path,
        protocol_id: str,
        role: str = "audit",
        pack: Optional[_Path] = None,
        author: Optional[str] = None,
        allow_mismatch_reason: Optional[str] = None,
    ) -> dict[str, Any]:
        """Record an audit evaluation of a round (``bat eval attach``)."""

def code_provenance(path: _Path) -> dict[str, Any]:
    """Git state of the training code at or above ``path``."""

def looks_like_round(path: _Path) -> bool: ...
def round_columns() -> list[str]:
    """The round-row columns, in order (docs/rounds.md)."""

def cli_main(argv: list[str], exe: Optional[_Path] = None) -> int:
    """Run the ``bat`` command line (``argv[0]`` is the program name) and
    return its exit code (the ``bat`` console script, batledger._cli);
    ``exe`` is the program that runs ``bat`` (the script itself)."""
