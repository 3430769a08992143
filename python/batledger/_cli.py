"""The ``bat`` console script of the ``batledger`` package.

``pip install ./python`` (or the wheel ``maturin build`` makes) installs a
``bat`` command next to ``import batledger``: :func:`main` hands
``sys.argv`` to the same Rust ``main`` the native binary runs, through the
extension, so both are one version and behave alike: the same output, exit
codes and ``bat --version``.

Signals are set up as a native process has them before entering Rust:
SIGINT gets its default action back (Python's handler would turn Ctrl-C into
a ``KeyboardInterrupt`` traceback once the command returned; the verbs that
stop at a safe point install their own handler and exit with 130) and
SIGPIPE stays ignored (Python and Rust both start so), so ``bat log | head``
ends as with the native binary: no message, no traceback.
"""

from __future__ import annotations

import os
import signal
import sys
import sysconfig

from . import _native


def _script() -> str | None:
    """The ``bat`` script this process runs as: the program the demo prints
    and the simulator backend starts as ``{bat}``. ``None`` (bat then names
    the interpreter) only when no installed script is found, e.g. under
    ``python -m batledger._cli`` without an install."""
    given = sys.argv[0] if sys.argv else ""
    if os.path.basename(given) == "bat" and os.access(given, os.X_OK):
        return os.path.abspath(given)
    scripts = sysconfig.get_path("scripts")
    installed = os.path.join(scripts, "bat") if scripts else ""
    if installed and os.access(installed, os.X_OK):
        return installed
    return None


def main() -> int:
    """Run ``bat`` with ``sys.argv``; returns its exit code."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # Undecodable bytes in an argument reach Rust as they were: sys.argv
    # keeps them as surrogate escapes, which the extension encodes back.
    code = _native.cli_main(sys.argv, _script())
    # Nothing went through Python's sys.stdout; should anything have, a
    # reader that left early must not turn the interpreter's final flush
    # into a traceback.
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return code


if __name__ == "__main__":
    sys.exit(main())
