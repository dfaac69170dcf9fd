"""Server instructions per GET/SET with the slow log and latency tracking on
and off (callgrind; deterministic where timing on a shared machine is not).

    python bench/slowlog_cost.py [--tree NAME=PATH ...] [--requests 2000]

For each tree (default: this one), starts the kernel-stack server under
valgrind --tool=callgrind (instrumented only during the timed part), sends
--requests GETs and as many SETs of 64 B on one connection, and prints the
inclusive instruction count of irs_data per request: with the defaults, and
with slowlog-log-slower-than -1 and latency-tracking no (a tree from before
the slow log accepts both settings and ignores them). Build each tree first
(meson compile -C build).
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyctl.proc import free_port, resp_command  # noqa: E402

OFF = [("CONFIG", "SET", "slowlog-log-slower-than", "-1"),
       ("CONFIG", "SET", "latency-tracking", "no")]  # fmt: skip


def measure(tree: Path, settings: list[tuple[str, ...]], requests: int) -> float:
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="slowlog-cost-"))
    out = work / "callgrind.out"
    env = dict(os.environ, PYTHONPATH=str(tree), INREPLAY_RUN_DIR=str(work))
    with open(work / "server.log", "wb") as log:
        proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
             sys.executable, "-m", "pyctl", "start", "--listen", f"127.0.0.1:{port}"],
            cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the server did not start; see {work}/server.log") from None
                time.sleep(0.2)

        def call(*args: str) -> None:
            sock.sendall(resp_command(*args))
            sock.recv(65536)

        for cmd in settings:
            call(*cmd)
        call("SET", "k", "x" * 64)
        for _ in range(200):
            call("GET", "k")
        subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], capture_output=True)
        for _ in range(requests):
            call("GET", "k")
        for _ in range(requests):
            call("SET", "k", "y" * 64)
        subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], capture_output=True)
        sock.close()
    finally:
        proc.terminate()
        proc.wait()
    report = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(out)],
                            capture_output=True, text=True, check=True).stdout
    for line in report.splitlines():
        if "irs_data" in line:
            m = re.match(r"\s*([\d,]+)", line)
            if m:
                return int(m.group(1).replace(",", "")) / (2 * requests)
    raise SystemExit(f"no irs_data in {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", default=[], help="NAME=PATH (default: this tree)")
    ap.add_argument("--requests", type=int, default=2000)
    a = ap.parse_args()
    trees = [t.split("=", 1) for t in a.tree] or [["this", str(ROOT)]]
    for name, path in trees:
        tree = Path(path)
        print(f"{name}: defaults {measure(tree, [], a.requests):.0f} instructions per request")
        print(f"{name}: slow log and latency tracking off "
              f"{measure(tree, OFF, a.requests):.0f} instructions per request")


if __name__ == "__main__":
    main()
