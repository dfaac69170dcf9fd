"""Where the microseconds of one request go on the DPDK path.

    python bench/breakdown.py [--workloads get:64,get:13MB,sample:512x28224,...]
                              [--mtu 1500,9000] [--seconds S] [--requests N] [--json FILE]

Runs each workload on one connection, one request in flight, against the DPDK
appliance (the same veth topology and core split as bench/latency.py, at each
MTU of --mtu; the appliance is started with the same --mtu) and reads the
appliance's cycle counters from DPDK telemetry before and after: the polling
loop counts, for the iterations that did work, the time in the driver's RX
burst, in lwIP's input, in dispatching lwIP's events to the server, and in the
driver's TX flush; the server counts the time in handling input, executing
commands and flushing replies. Divided by the requests, with the client's
measured round trip, that is one request's budget.

Workloads: get:SIZE (GET of a SIZE-byte value), sample:NxSIZE (REPLAY.SAMPLE of
N items of SIZE bytes) and sample-packed:NxSIZE (the same with PACKED); sizes in
bytes or with a KB/MB suffix (28224 is one 84x84x4 Atari state). Each workload
runs for about --seconds (at most --requests requests). A workload the server
refuses (PACKED before it lands) or an MTU it cannot start at is recorded under
"errors"; the exit status is 1 only if nothing was measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from latency import (  # noqa: E402
    KB,
    MB,
    MTUS,
    TABLE_ITEMS,
    BenchError,
    Conn,
    Pinning,
    ServerReplyError,
    Table,
    Workload,
    kv_workloads,
    load,
    machine,
    make_server,
    make_table,
    network,
    reply_size,
    sample_packed_workload,
    sample_workload,
    sigterm_as_exit,
)

from pyctl import netns, telemetry  # noqa: E402

COUNTERS = ("work_iterations", "cycles_rx", "cycles_stack", "cycles_dispatch", "cycles_tx",
            "cycles_input", "cycles_execute", "cycles_reply", "commands")
DEFAULT_WORKLOADS = ("get:64",)
PORT = 7200


def read(prefix: str) -> dict[str, int]:
    time.sleep(0.3)  # both snapshots are refreshed every 100 ms
    t = telemetry.query(prefix, "/inreplay/stats")["/inreplay/stats"]
    return {k: int(t[k]) for k in (*COUNTERS, "tsc_hz")}


# ---- workloads ----------------------------------------------------------------------


def parse_size(text: str) -> int:
    """'64' -> 64, '64KB' -> 65536, '13MB' -> 13631488."""
    t = text.strip().upper()
    for suffix, scale in (("MB", MB), ("KB", KB), ("B", 1)):
        if t.endswith(suffix):
            return int(t[: -len(suffix)]) * scale
    return int(t)


def parse_spec(spec: str) -> tuple[str, int, int]:
    """'get:13MB' -> ('get', 1, 13 MB); 'sample-packed:512x28224' -> ('sample-packed', 512, ...)."""
    kind, _, arg = spec.partition(":")
    if kind == "get" and arg:
        return kind, 1, parse_size(arg)
    if kind in ("sample", "sample-packed") and "x" in arg:
        n, _, size = arg.partition("x")
        return kind, int(n), parse_size(size)
    raise SystemExit(f"--workloads: {spec!r}: use get:SIZE, sample:NxSIZE or "
                     "sample-packed:NxSIZE (sizes in bytes or with KB/MB)")


def command_of(kind: str) -> str:
    return "GET" if kind == "get" else "REPLAY.SAMPLE"


class Data:
    """What the workloads read, loaded into one server on first use."""

    def __init__(self, conn: Conn, table_items: int | None = None, seed: int = 1) -> None:
        self.conn = conn
        self.table_items = table_items
        self.seed = seed
        self.values: set[int] = set()
        self.tables: dict[int, Table] = {}

    def workload(self, spec: str) -> Workload:
        kind, n, size = parse_spec(spec)
        if kind == "get":
            if size not in self.values:
                load(self.conn, "dpdk", [], [size])
                self.values.add(size)
            return next(w for w in kv_workloads([size]) if w.kind == "get")
        t = self.tables.get(size)
        if t is None:
            items = self.table_items or TABLE_ITEMS.get(size, 1_000)
            t = make_table(size, items, self.seed + len(self.tables))
            load(self.conn, "dpdk", [t], [], baseline_keys=False)
            self.tables[size] = t
        return (sample_workload if kind == "sample" else sample_packed_workload)(t, n)

    def close(self) -> None:
        for t in self.tables.values():
            t.sampler.close()


# ---- one workload -------------------------------------------------------------------


def measure_one(conn: Conn, prefix: str, w: Workload, mtu: int, seconds: float,
                max_requests: int) -> dict[str, Any]:
    size, _raw = reply_size(conn, w)

    def call() -> None:
        w.finish(conn.call_sized(w.request(), size))

    # warm up for a tenth of the budget (at most 2,000 requests), and size the run from it
    t0 = time.perf_counter()
    warm = 0
    while warm < 2000 and (time.perf_counter() - t0 < seconds / 10 or warm < 3):
        call()
        warm += 1
    per = (time.perf_counter() - t0) / warm
    n = max(20, min(max_requests, int(seconds / per)))
    before = read(prefix)
    rtts = []
    for _ in range(n):
        t = time.perf_counter_ns()
        call()
        rtts.append(time.perf_counter_ns() - t)
    after = read(prefix)
    d = {k: after[k] - before[k] for k in COUNTERS}
    if d["commands"] < n:
        raise BenchError(f"the appliance counted {d['commands']} commands for {n} requests")
    us = 1e6 / after["tsc_hz"] / n  # cycles -> µs per request

    def per_req(k: str) -> float:
        return d[k] * us

    cmd = command_of(w.kind)
    # cycles_input (the data upcall) holds execute and the flushes made right after it;
    # a reply too big for lwIP's send buffer is flushed again from the writable upcall,
    # inside cycles_dispatch but outside cycles_input. The counters do not say which
    # flush was where: whatever of cycles_reply does not fit in input - execute was
    # outside it (parsing one request is counted as nothing in that case).
    inp, ex, rep = per_req("cycles_input"), per_req("cycles_execute"), per_req("cycles_reply")
    reply_outside = max(0.0, rep - (inp - ex))
    server_side = {
        "driver RX (rx_burst, af_packet ring)": per_req("cycles_rx"),
        "lwIP input (IP, TCP) and timers": per_req("cycles_stack"),
        # never below zero, but the subtraction can leave -1e-13 when the reply was outside
        "parse and bookkeeping (RESP parser, dispatch)":
            max(0.0, inp - ex - (rep - reply_outside)),
        f"execute ({cmd})": ex,
        "reply (RESP encoding, lwIP tcp_write/output)": rep,
        "lwIP event delivery around the upcalls":
            per_req("cycles_dispatch") - inp - reply_outside,
        "driver TX (tx_buffer_flush: af_packet sendto)": per_req("cycles_tx"),
    }
    total = sum(server_side.values())
    rtt_mean = statistics.fmean(rtts) / 1000
    return {
        "workload": w.name,
        "kind": w.kind,
        "size": w.size,
        "batch": w.batch,
        "payload": w.payload,
        "reply_bytes": size,
        "mtu": mtu,
        "requests": n,
        "rtt_p50_us": statistics.median(rtts) / 1000,
        "rtt_mean_us": rtt_mean,
        "work_iterations_per_request": d["work_iterations"] / n,
        "stages_us": server_side,
        "appliance_us": total,
        "outside_us": rtt_mean - total,
        "tsc_hz": after["tsc_hz"],
    }


# ---- every workload at every MTU ----------------------------------------------------


def measure(specs: list[str], mtus: list[int], seconds: float, max_requests: int,
            table_items: int | None = None) -> dict[str, Any]:
    started = time.time()
    runs: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    pin = Pinning.choose(server=0, client=1)
    with sigterm_as_exit(), tempfile.TemporaryDirectory(prefix="irbd") as tmp:
        for mtu in mtus:
            with network(False, mtu=mtu) as net:
                try:
                    server = make_server("dpdk", net, pin, Path(tmp), PORT).start()
                except BenchError as e:
                    errors[f"MTU {mtu}"] = str(e)
                    log(f"[MTU {mtu}] not run: {e}")
                    continue
                try:
                    pin.pin_client()
                    conn = Conn.connect(server.host, server.port)
                    data = Data(conn, table_items)
                    try:
                        for spec in specs:
                            w = data.workload(spec)
                            try:
                                r = measure_one(conn, server.file_prefix, w, mtu, seconds,
                                                max_requests)
                            except ServerReplyError as e:
                                errors[f"{w.name} (MTU {mtu})"] = f"ServerReplyError: {e}"
                                log(f"[MTU {mtu}] {w.name}: refused ({e})")
                                continue
                            runs.append(r)
                            log(f"[MTU {mtu}] {w.name:<26} {r['requests']:>6} requests, "
                                f"p50 {r['rtt_p50_us']:>9.1f} µs, in the loop "
                                f"{r['appliance_us']:>9.1f} µs")
                    finally:
                        conn.close()
                        data.close()
                except (OSError, BenchError, KeyError) as e:
                    errors[f"MTU {mtu}"] = f"{type(e).__name__}: {e}\n{server.log_tail()}"
                    log(f"[MTU {mtu}] failed: {e}")
                finally:
                    server.stop()
    return {"bench": "breakdown", "machine": {**machine(), "loadavg_end": os.getloadavg()[0]},
            "workloads": specs, "mtus": mtus, "runs": runs, "errors": errors,
            "seconds": time.time() - started}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def show(r: dict[str, Any]) -> str:
    lines = [f"{r['workload']} on the DPDK path, MTU {r['mtu']}, {r['requests']} requests: "
             f"round trip p50 {r['rtt_p50_us']:.1f} µs, mean {r['rtt_mean_us']:.1f} µs"]
    lines += [f"  {v:9.2f} µs  {name}" for name, v in r["stages_us"].items()]
    lines.append(f"  {r['appliance_us']:9.2f} µs  in the appliance's loop")
    lines.append(f"  {r['outside_us']:9.2f} µs  outside it (client, kernel, veth, waiting for "
                 "a poll)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS),
                    help="comma-separated get:SIZE, sample:NxSIZE, sample-packed:NxSIZE "
                         f"(default {','.join(DEFAULT_WORKLOADS)})")
    ap.add_argument("--mtu", default=",".join(map(str, MTUS)), metavar="N,N",
                    help="veth (and appliance) MTUs, comma-separated (default 1500,9000)")
    ap.add_argument("--seconds", type=float, default=3.0, help="about this long per workload")
    ap.add_argument("--requests", type=int, default=20000, help="at most this many per workload")
    ap.add_argument("--table-items", type=int,
                    help="items per replay table (default as bench/latency.py's full run)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    specs = [x.strip() for x in args.workloads.split(",") if x.strip()]
    for spec in specs:
        parse_spec(spec)
    try:
        mtus = [netns.check_mtu(int(x)) for x in args.mtu.split(",") if x.strip()]
        doc = measure(specs, mtus, args.seconds, args.requests, args.table_items)
    except (BenchError, netns.SetupError) as e:
        print(f"breakdown: {e}", file=sys.stderr)
        return 2
    for r in doc["runs"]:
        print(show(r))
    for what, err in doc["errors"].items():
        print(f"breakdown: {what} not measured: {err}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if doc["runs"] else 1


if __name__ == "__main__":
    sys.exit(main())
