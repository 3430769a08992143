"""Recording a training run into a bat ledger, one commit per round.

:class:`Recorder` is a context manager for any training loop::

    import batledger as bat

    with bat.Recorder("campaign/") as rec:
        for n in range(rounds):
            out_dir = train_one_round(n)      # writes a folder
            rec.round(out_dir, metrics={"loss": loss})

A folder with a full round layout (``data/manifest.json``,
``candidate-eval/``, ``gate.json``) is validated and recorded as a round
commit, exactly as ``bat commit ROUND_DIR`` does (a refused round raises
:class:`batledger.RoundRejected` and records nothing). Any other folder
(e.g. a trainer checkpoint) is recorded as a plain commit whose metadata
holds the round number, the caller's metrics and the training code's git
provenance (HEAD, branch, dirtiness, patch digest: what bat records for a
round). Commits go to ``branch`` (default: the ledger's current branch).

:meth:`Recorder.trl_callback` returns a ``transformers.TrainerCallback``
(the callback type TRL's trainers take) that calls :meth:`Recorder.round`
at the end of each round: after each checkpoint save (``every="save"``,
the default: the checkpoint folder is recorded) or each epoch
(``every="epoch"``). ``transformers`` is imported only then.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Optional

from . import _native

#: The ``kind`` of a plain commit the recorder made (round commits made from
#: a validated round directory keep ``bat_round``).
KIND = "bat_trainer_round"


class Recorder:
    """Commits a round directory to a ledger at the end of each round.

    ``ledger_path``: the ledger (or a folder below it). ``branch``: where
    commits go (created from HEAD if new). ``code_repo``: the training
    code's git repository for provenance (None: the repository around the
    current directory, if any; False: none). ``metadata``: merged into every
    plain commit's metadata (e.g. the run's hyper-parameters). ``plain``:
    record round-shaped folders as plain commits too.
    """

    def __init__(
        self,
        ledger_path: Any = ".",
        *,
        branch: Optional[str] = None,
        code_repo: Any = None,
        metadata: Optional[Mapping[str, Any]] = None,
        plain: bool = False,
        author: Optional[str] = None,
    ) -> None:
        self.ledger_path = ledger_path
        self.branch = branch
        self.code_repo = code_repo
        self.metadata = dict(metadata or {})
        self.plain = plain
        self.author = author
        self.ledger: Optional[Any] = None
        self.rounds: list = []

    def __enter__(self) -> "Recorder":
        from . import Ledger

        self.ledger = Ledger(self.ledger_path)
        return self

    def __exit__(self, *exc: Any) -> None:
        # Dropping the handle releases the ledger's shared lock; an
        # exception in the loop propagates (nothing half-recorded exists:
        # every commit is atomic).
        self.ledger = None

    def _provenance(self) -> Optional[dict]:
        repo = self.code_repo
        if repo is False:
            return None
        try:
            return _native.code_provenance(os.getcwd() if repo is None else repo)
        except _native.LedgerError:
            if repo is None:
                return None  # not inside a git repository: nothing to record
            raise

    def round(
        self,
        round_dir: Any,
        *,
        message: Optional[str] = None,
        metrics: Optional[Mapping[str, Any]] = None,
    ) -> dict:
        """Commit ``round_dir`` as the next round; returns the outcome dict
        (``commit``, ``refname``, ...; plus ``round`` for plain commits)."""
        if self.ledger is None:
            raise RuntimeError("use the Recorder as a context manager: `with Recorder(...) as rec:`")
        n = len(self.rounds) + 1
        if not self.plain and _native.looks_like_round(round_dir):
            out = self.ledger.commit_round(
                round_dir, message=message, branch=self.branch, code_repo=self.code_repo, author=self.author
            )
        else:
            meta = dict(self.metadata)
            meta.update(
                {
                    "kind": KIND,
                    "round": n,
                    "metrics": dict(metrics or {}),
                    "provenance": {
                        "code": self._provenance(),
                        "recorder": f"batledger {_native.__version__}",
                    },
                    "fields": {"round": n},
                }
            )
            out = self.ledger.commit(
                round_dir,
                message or f"round {n}: {os.path.basename(os.path.normpath(str(round_dir)))}",
                metadata=meta,
                branch=self.branch,
                author=self.author,
            )
            out["round"] = n
        self.rounds.append(out)
        return out

    def trl_callback(
        self,
        every: str = "save",
        round_dir: Optional[Callable[[Any, Any], Any]] = None,
    ) -> Any:
        """A ``transformers.TrainerCallback`` for TRL's trainers
        (``GRPOTrainer(..., callbacks=[rec.trl_callback()])``) that records
        a round at each checkpoint save (``every="save"``) or epoch end
        (``every="epoch"``). ``round_dir(args, state)`` picks the folder to
        record; by default the checkpoint just saved
        (``output_dir/checkpoint-<step>``), else ``output_dir``. With
        ``every="epoch"`` pass ``round_dir``: transformers calls
        ``on_epoch_end`` before it saves that epoch's checkpoint, so the
        default would record ``output_dir`` as it stands. Only the main
        process records."""
        if every not in ("save", "epoch"):
            raise ValueError(f"every={every!r}: choose 'save' or 'epoch'")
        return _callback_class()(self, every, round_dir)


def _default_round_dir(args: Any, state: Any) -> str:
    ckpt = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
    return ckpt if os.path.isdir(ckpt) else args.output_dir


def _trainer_metrics(state: Any) -> dict:
    """The measured compute and the last logged values of the trainer."""
    last: dict = {}
    for entry in getattr(state, "log_history", None) or []:
        last.update({k: v for k, v in entry.items() if isinstance(v, (int, float, str, bool))})
    return {
        "steps": state.global_step,
        "epoch": state.epoch,
        "num_input_tokens_seen": getattr(state, "num_input_tokens_seen", None),
        "last_logged": last,
    }


_CLASS: Any = None


def _callback_class() -> Any:
    """Build the TrainerCallback subclass on first use (lazy import)."""
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    from transformers import TrainerCallback

    class RecorderCallback(TrainerCallback):
        """Records a round into a bat ledger at each save or epoch end."""

        def __init__(self, recorder: Recorder, every: str, round_dir: Any) -> None:
            self.recorder = recorder
            self.every = every
            self.round_dir = round_dir or _default_round_dir

        def _record(self, args: Any, state: Any) -> None:
            if not state.is_world_process_zero:
                return
            self.recorder.round(self.round_dir(args, state), metrics=_trainer_metrics(state))

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if self.every == "save":
                self._record(args, state)
            return control

        def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if self.every == "epoch":
                self._record(args, state)
            return control

    _CLASS = RecorderCallback
    return _CLASS
