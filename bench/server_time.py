"""Server time of REPLAY.SAMPLE 512 (PACKED and plain) and REPLAY.UPDATE 512.

    python bench/server_time.py [--items 100000,2000000] [--calls 300] [--item-bytes 128]
                                [--tree PATH ...] [--rounds 5] [--callgrind DIR]
                                [--hosts native,module] [--in-cache 4096]

Starts the kernel-stack server of each source tree (default: this one) on
loopback, fills a table with ITEMS items of --item-bytes bytes (random
priorities), then runs --calls of each command on one connection and reads
its usec_per_call from INFO commandstats (CONFIG RESETSTAT before each
phase): the server's own time per call, without the network or the client.
With several trees, rounds interleave them. --callgrind DIR runs the server
under valgrind --tool=callgrind, instrumented only during the timed phases,
and dumps one profile per phase into DIR (instruction counts are
deterministic where the times on a shared machine are not). --hosts module
measures the same commands in Debian's stock redis-server with the tree's
REPLAY.* module (build/fstack_redis/module/inreplay_module.so; Redis's own
INFO commandstats), its rows named <tree>+module.

Each round also runs build/bench/memfloor (--memfloor PATH) at every --items:
the time this machine needs only to touch the cache lines the commands must
touch (tree path, slot record, item) and to make UPDATE's 512 pow() calls,
so that bench/report.py can put item 4's absolute goals beside that floor,
judge the server against that floor round by round, and judge the candidate
layouts memfloor measures in the same passes (--layout all) against today's.
The rounds (default 5) interleave the trees, the table sizes and the floor, so
a machine that slows down for a while slows all of them.

Each round also times the commands on a table of --in-cache items (default
4096; 0: none), small enough that its tree, records and items stay in the
caches: that is the commands' own work (the descent's compares, the random
points, the weights, the reply) without the misses the floor times, and its
rows and floor carry "in_cache": true. bench/report.py leaves them out of the
goals and names that work as the cause when the server does not sit on the
floor.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyctl.proc import free_port, resp_command  # noqa: E402

Arg = bytes | str | int
BATCH = 512
PHASES = ("packed", "plain", "update")


class Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def call(self, *args: Arg) -> bytes:
        self.sock.sendall(resp_command(*args))
        while True:
            end = _parse(self.buf, 0)
            if end is not None:
                reply, self.buf = self.buf[:end], self.buf[end:]
                if reply.startswith(b"-"):
                    raise SystemExit(f"server error: {reply[:200]!r}")
                return reply
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise SystemExit("the server closed the connection")
            self.buf += chunk


def _parse(d: bytes, i: int) -> int | None:
    """End offset of the RESP2 reply at d[i:], None if it is not all there."""
    j = d.find(b"\r\n", i)
    if j < 0:
        return None
    t = d[i:i + 1]
    if t in (b"+", b"-", b":"):
        return j + 2
    n = int(d[i + 1:j])
    if t == b"$":
        end = j + 2 + max(n, 0) + (2 if n >= 0 else 0)
        return end if len(d) >= end else None
    k: int | None = j + 2
    for _ in range(max(n, 0)):
        k = _parse(d, k) if k is not None else None
        if k is None:
            return None
    return k


def usec_per_call(info: bytes, command: str) -> float:
    for line in info.decode().splitlines():
        if line.startswith(f"cmdstat_{command}:"):
            return float(line.rsplit("usec_per_call=", 1)[1].split(",")[0])
    raise SystemExit(f"no {command} in INFO commandstats")


def run(tree: Path, items: int, calls: int, item_bytes: int, callgrind: Path | None,
        tag: str, host: str = "native") -> dict[str, float]:
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="irsrvtime-"))
    env = dict(os.environ, PYTHONPATH=str(tree), INREPLAY_RUN_DIR=str(work))
    pre: list[str] = []
    if callgrind:
        callgrind.mkdir(parents=True, exist_ok=True)
        pre = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
               f"--callgrind-out-file={callgrind / f'callgrind.{tag}.out'}"]
    if host == "module":
        module = tree / "build" / "fstack_redis" / "module" / "inreplay_module.so"
        if not module.is_file():
            raise SystemExit(f"no {module}: make build there (with Redis's source in build-deps/)")
        argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(work), "--loadmodule", str(module),
                "SEED", "1"]
    else:
        argv = [sys.executable, "-m", "pyctl", "start", "--listen", f"127.0.0.1:{port}",
                "--seed", "1"]
    with open(work / "server.log", "wb") as log:
        proc = subprocess.Popen([*pre, *argv], cwd=tree, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                c = Conn(port)
                c.call("PING")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the server did not start; see {work}/server.log") from None
                time.sleep(0.2)
        c.call("REPLAY.CREATE", "t", "CAPACITY", items, "MAXBYTES", items * (item_bytes + 64))
        rnd = random.Random(1)
        for _ in range(0, items, 500):
            args: list[Arg] = ["REPLAY.ADD", "t"]
            for _ in range(500):
                args += [f"{rnd.uniform(0.1, 1.1):.4f}", os.urandom(item_bytes)]
            c.call(*args)
        body = c.call("REPLAY.SAMPLE", "t", BATCH, "PACKED")
        ids = body[body.index(b"\r\n") + 2:][:8 * BATCH]
        prios = struct.pack(f"<{BATCH}f", *[rnd.uniform(0.1, 1.1) for _ in range(BATCH)])
        requests: dict[str, tuple[Arg, ...]] = {
            "packed": ("REPLAY.SAMPLE", "t", BATCH, "PACKED"),
            "plain": ("REPLAY.SAMPLE", "t", BATCH),
            "update": ("REPLAY.UPDATE", "t", ids, prios)}
        for _ in range(20):  # warm up
            for req in requests.values():
                c.call(*req)
        if callgrind:
            subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], capture_output=True)
        out: dict[str, float] = {}
        for phase in PHASES:
            c.call("CONFIG", "RESETSTAT")
            if callgrind:
                subprocess.run(["callgrind_control", "-z", str(proc.pid)], capture_output=True)
            for _ in range(calls):
                c.call(*requests[phase])
            if callgrind:
                subprocess.run(["callgrind_control", f"--dump={phase}", str(proc.pid)],
                               capture_output=True)
            cmd = "replay.update" if phase == "update" else "replay.sample"
            out[phase] = usec_per_call(c.call("INFO", "commandstats"), cmd)
        return out
    finally:
        proc.terminate()
        proc.wait(60)


def memfloor(path: Path, items: int, item_bytes: int) -> dict[str, Any]:
    """One run of bench/memfloor.c over every candidate layout: its JSON object (floor
    times in µs; the top-level ones today's layout's, "layouts" every candidate's)."""
    out = subprocess.run([str(path), "--items", str(items), "--item-bytes", str(item_bytes),
                          "--layout", "all"],
                         capture_output=True, text=True, check=True, timeout=600)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", default="100000,2000000")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--item-bytes", type=int, default=128)
    ap.add_argument("--tree", action="append", help="source tree (repeatable; default: this one)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="interleaved rounds (the server-at-floor goal asks for at least 5)")
    ap.add_argument("--callgrind", type=Path, help="profile under callgrind into this directory")
    ap.add_argument("--json", type=Path, help="write the rows here (bench/report.py --server-time)")
    ap.add_argument("--memfloor", type=Path, default=ROOT / "build" / "bench" / "memfloor",
                    help="the floor benchmark (default: build/bench/memfloor)")
    ap.add_argument("--hosts", default="native",
                    help="native (the server), module (redis-server with the REPLAY.* module), "
                         "or both: native,module")
    ap.add_argument("--in-cache", type=int, default=4096, metavar="ITEMS",
                    help="also time a table this small, whose lines stay in the caches: the "
                         "commands' work without their misses (0: none)")
    a = ap.parse_args()
    hosts = a.hosts.split(",")
    if not hosts or set(hosts) - {"native", "module"}:
        ap.error("--hosts: native, module or native,module")
    trees = [Path(t).resolve() for t in a.tree] if a.tree else [ROOT]
    print(f"| round | tree | items | SAMPLE {BATCH} PACKED µs | SAMPLE {BATCH} µs | "
          f"UPDATE {BATCH} µs |\n|---|---|---|---|---|---|", flush=True)
    if not a.memfloor.is_file():
        ap.error(f"no {a.memfloor}: make build")
    rows, floors = [], []
    sizes = [int(x) for x in a.items.split(",")]
    if a.in_cache and a.in_cache not in sizes:
        sizes.insert(0, a.in_cache)
    cached = {a.in_cache} if a.in_cache else set()
    for r in range(a.rounds):
        for tree in trees:
            for host in hosts:
                name = tree.name if host == "native" else f"{tree.name}+module"
                for items in sizes:
                    t = run(tree, items, a.calls, a.item_bytes, a.callgrind,
                            f"{name}.{items}.{r}", host)
                    print(f"| {r} | {name} | {items:,} | {t['packed']:.2f} | "
                          f"{t['plain']:.2f} | {t['update']:.2f} |", flush=True)
                    rows.append({"round": r, "tree": name, "items": items,
                                 "item_bytes": a.item_bytes, "batch": BATCH,
                                 "in_cache": items in cached,
                                 **{f"{k}_us": v for k, v in t.items()}})
        for items in sizes:
            f = memfloor(a.memfloor, items, a.item_bytes)
            print(f"| {r} | floor | {items:,} | {f['sample_us']:.2f} | (tree {f['tree_us']:.2f}, "
                  f"items {f['items_us']:.2f}) | {f['update_us']:.2f} + pow {f['pow_us']:.2f} |",
                  flush=True)
            floors.append({"round": r, "in_cache": items in cached, **f})
            best = min(((k, v) for k, v in f["layouts"].items() if not v.get("bound")),
                       key=lambda kv: kv[1]["sample_us"])
            print(f"| {r} | layouts | {items:,} | best {best[0]} {best[1]['sample_us']:.2f} "
                  f"({best[1]['sample_us'] / f['sample_us']:.2f}× today's) | | |", flush=True)
    if a.json:
        machine = {"cpus": os.cpu_count(), "python": platform.python_version(),
                   "loadavg_end": os.getloadavg()[0]}
        a.json.write_text(json.dumps({"calls": a.calls, "machine": machine, "rows": rows,
                                      "floor": floors}, indent=1))


if __name__ == "__main__":
    main()
