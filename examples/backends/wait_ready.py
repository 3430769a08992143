"""Wait until an OpenAI-compatible server on loopback answers /health.

Usage: python wait_ready.py HOST PORT SERVER_PID TIMEOUT_SECONDS
       python wait_ready.py --free-port

Exits 0 once GET /health returns 200; exits non-zero (with a message) when
the server process is gone or the time limit passes, so a wrapper never
runs its harness against a server that did not come up. `--free-port`
prints a free TCP port on 127.0.0.1 instead. Used by trl/evaluate.sh and
vllm_evaluator.sh.
"""
import os
import socket
import sys
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(host: str, port: str, pid: int, limit: float) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        try:
            os.kill(pid, 0)
        except OSError:
            sys.exit("the server exited before becoming ready")
        time.sleep(0.5)
    sys.exit(f"the server was not ready after {limit} s")


if __name__ == "__main__":
    if sys.argv[1:] == ["--free-port"]:
        print(free_port())
    elif len(sys.argv) == 5:
        wait(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(__doc__)
