"""Regenerate the documentation's performance sections from benchmark JSON.

    python bench/report.py [--sumtree build/bench-sumtree.json] [--latency build/bench-latency.json]
                           [--throughput build/bench-throughput.json]
                           [--breakdown build/bench-breakdown.json]
                           [--demo build/bench-cartpole/summary.json]
                           [--demo-kernel build/bench-cartpole-kernel/summary.json]
                           [--breakout build/bench-breakout/summary.json]
                           [--faults build/bench-faults.json] [--readme docs/benchmarks.md ...]

Each section sits between `<!-- BEGIN name ... -->` and `<!-- END name -->`
markers, in one of the pages under docs/ (or the files given with --readme);
everything between them is replaced, nothing else is touched.
The bench-goals section marks each goal PASS, NOT MET or NOT
MEASURED with its numbers (evaluate_goals) and, under every goal not met,
the DPDK per-stage breakdown of that workload from bench/breakdown.py with a
sentence saying which stage dominates and how much would have to go.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyctl.sysinfo import cpu_model  # noqa: E402


def machine_line(doc: dict[str, Any]) -> str:
    m = doc.get("machine", {})
    return (f"Measured by `make bench` on {cpu_model()}, {m.get('cpus', '?')} cores, "
            f"Python {m.get('python', '?')}{' (quick run)' if doc.get('quick') else ''}.")


def sumtree_k_section(doc: dict[str, Any]) -> str:
    rows = doc.get("sumtree_k") or []
    if not rows:
        return "*The K benchmark did not run (build/bench/sumtree_k missing).*"
    caps = sorted({r["capacity"] for r in rows})
    ks = sorted({r["k"] for r in rows})
    by = {(r["capacity"], r["k"]): r for r in rows}
    out = ["Fanout K, in C without Python: µs per call of 512, median "
           "(sample includes importance weights).", "",
           "| capacity | " + " | ".join(f"K={k} sample / update" for k in ks) + " |",
           "|---|" + "---|" * len(ks)]
    for cap in caps:
        cells = []
        for k in ks:
            r = by.get((cap, k))
            cells.append(f"{r['sample_ns'] / 1e3:.1f} / {r['update_ns'] / 1e3:.1f}" if r else "—")
        out.append(f"| {cap:,} | " + " | ".join(cells) + " |")
    big = caps[-1]
    best_s = min((by[(big, k)] for k in ks if (big, k) in by), key=lambda r: r["sample_ns"])
    best_u = min((by[(big, k)] for k in ks if (big, k) in by), key=lambda r: r["update_ns"])
    out += ["", f"At {big:,} the fastest sample is K={best_s['k']} "
                f"({best_s['sample_ns'] / 1e3:.1f} µs) and the fastest update K={best_u['k']} "
                f"({best_u['update_ns'] / 1e3:.1f} µs).", "", machine_line(doc)]
    return "\n".join(out)


def sumtree_compare_section(doc: dict[str, Any]) -> str:
    results = doc.get("results") or []
    if not results:
        return "*No comparison results.*"
    by = {(r["impl"], r["capacity"]): r for r in results}
    caps = sorted({r["capacity"] for r in results})
    others = [i for i in ("cpprb", "torchrl", "numpy") if any(r["impl"] == i for r in results)]
    ops = ("insert", "sample", "update")
    out = ["Batch of 512 through Python (cffi for ours), µs per call, median; "
           "ratios are theirs / ours (above 1: ours is faster).", "",
           "| capacity | op | ours |" + "".join(f" {o} | {o}/ours |" for o in others),
           "|---|---|---|" + "---|---|" * len(others)]
    for cap in caps:
        for op in ops:
            ours = by.get(("ours", cap), {}).get(op)
            row = f"| {cap:,} | {op} | {ours:.1f} |" if ours else f"| {cap:,} | {op} | — |"
            for o in others:
                t = by.get((o, cap), {}).get(op)
                row += f" {t:.1f} | {t / ours:.1f}× |" if t and ours else " — | — |"
            out.append(row)
    big = caps[-1]
    o, c = by.get(("ours", big)), by.get(("cpprb", big))
    if o:
        line = f"\nAt {big:,}: sample(512)+weights {o['sample']:.1f} µs (target ≤ 25 µs)"
        if c:
            line += (f"; {c['sample'] / o['sample']:.1f}× cpprb's sample (target ≥ 20×), "
                     f"{c['update'] / o['update']:.1f}× its update (target ≥ 10×)")
        out.append(line + ".")
    notes = doc.get("notes") or []
    if notes:
        out += ["", "Notes from the run:"] + [f"- {n}" for n in notes]
    out += ["", machine_line(doc)]
    return "\n".join(out)


# ---- network benchmarks (bench/latency.py, bench/throughput.py) -------------

SYSTEM_ORDER = ("redis", "kernel", "kernel-poll", "dpdk")
INNET = ("kernel", "kernel-poll", "dpdk")  # the inreplay systems; "redis" is stock Redis
KERNEL_STACK = ("redis", "kernel", "kernel-poll")
PATH_LABEL = {"shared": "shared veth", "kernel-default": "default offloads",
              "loopback": "loopback"}
Row = dict[str, Any]

KB, MB = 1 << 10, 1 << 20
ATARI_ITEM = 84 * 84 * 4  # one 84x84x4 state

# The goals (targets, not results): ratios of p50s in one run on one path.
GOAL_BATCH = 512
GOAL_GET_VS_POLL = 0.9  # DPDK GET 64 B p50 <= 0.9x kernel-poll's
GOAL_GET_VS_REDIS = 0.5  # ... and <= 0.5x stock Redis's
GOAL_MBPS_SIZES = (64 * KB, MB, 13 * MB)  # DPDK GET MB/s >= the best kernel system's
GOAL_MBPS_RATIO = 1.0
GOAL_SAMPLE = ((128, 0.5), (ATARI_ITEM, 0.8))  # REPLAY.SAMPLE <= ratio x the baseline
GOAL_DEMO_RATIO = 0.95  # learner steps/s with the appliance on DPDK vs the kernel stack
# DPDK against kernel-poll on the same wire (the shared veth, offloads
# off) at jumbo frames: bulk GETs at least as fast, the 28 KB sample no slower.
SAME_WIRE_MTU = 9000
SAME_WIRE_MBPS = ((64 * KB, 1.0), (MB, 1.0), (13 * MB, 1.0))
SAME_WIRE_SAMPLE = (ATARI_ITEM, 1.0)  # p50 <= ratio x kernel-poll's (better of plain/PACKED)
REFERENCE_GET_US = 27.4
"""DPDK `GET 64 B` p50 as first measured (commit c5d7622, MTU 1500 lwIP)."""
REFERENCE_SLACK = 0.10  # small-request latency stays within 10% of the reference


def human(size: int) -> str:
    """Sizes as bench/latency.py names them: 128 B, 28 KB, 13 MB."""
    for unit, scale in (("MB", MB), ("KB", KB)):
        if size >= scale:
            return f"{size / scale:.0f} {unit}"
    return f"{size} B"


def us(v: float) -> str:
    return f"{v:.1f}" if v < 100 else f"{v:,.0f}"


def p50(r: Row | None) -> float | None:
    return r["p50_us"] if r else None


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}×" if a is not None and b else "—"


def lat_cell(r: Row | None) -> str:
    """p50 (p99) in µs."""
    return f"{us(r['p50_us'])} ({us(r['p99_us'])})" if r else "—"


def mbps_p50(r: Row) -> float:
    """MB/s of one connection from the p50: payload bytes / p50."""
    return r["payload"] / r["p50_us"]


class Lat:
    """bench/latency.py's JSON, indexed by (system, workload, path, MTU).

    JSON from before paths and MTUs (one veth) reads as the shared path at its MTU."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        net = doc.get("network", {})
        base = "loopback" if net.get("path") == "loopback" else "shared"
        for r in doc.get("latency", []) + doc.get("pipelined", []):
            r.setdefault("path", base)
            r.setdefault("mtu", net.get("mtu"))
        rows = doc.get("latency", [])
        self.rows = rows
        self.mtus: list[int | None] = list(dict.fromkeys(
            doc.get("mtus") or [r["mtu"] for r in rows])) or [None]
        self.base_path = base
        self.paths = [p for p in (doc.get("paths") or [base])
                      if any(r["path"] == p for r in rows)] or [base]
        self.by = {(r["system"], r["workload"], r["path"], r["mtu"]): r for r in rows}
        self.pipe = {(r["system"], r["workload"], r["path"], r["mtu"]): r
                     for r in doc.get("pipelined", [])}
        self.local = {r["workload"]: r for r in doc.get("local", [])}

    def get(self, system: str, workload: str, path: str | None, mtu: int | None) -> Row | None:
        return self.by.get((system, workload, path or self.base_path, mtu))

    def columns(self, mtu: int | None, kinds: tuple[str, ...]) -> list[tuple[str, str]]:
        """(system, path) pairs with rows of these kinds at this MTU, in a stable order."""
        return [(s, p) for p in self.paths for s in SYSTEM_ORDER
                if any(r["system"] == s and r["path"] == p and r["mtu"] == mtu
                       and r["kind"] in kinds for r in self.rows)]

    def why_missing(self, system: str, path: str | None, mtu: int | None) -> str:
        """Why a system has no row on a path: its error, or that it was not in the run."""
        path = path or self.base_path
        errors = self.doc.get("errors", {})
        keys = [f"{system} ({path}, MTU {mtu})", f"{system} ({path})", system]
        for k in keys:
            if k in errors:
                return f"{k} not measured: {errors[k].splitlines()[0]}"
        if system not in self.doc.get("systems", []):
            return f"{system} not in this run"
        return f"{system} ({path}, MTU {mtu}) not in this run"


def col_name(system: str, path: str) -> str:
    return f"{system}, {PATH_LABEL.get(path, path)}"


def mtu_title(mtu: int | None) -> str:
    return f"MTU {mtu}" if mtu else "loopback"


def context_lines(*docs: dict[str, Any]) -> list[str]:
    """Paths, pinning, machine load, systems that did not run, the machine line."""
    doc = docs[0]
    net, pin = doc.get("network", {}), doc.get("pinning", {})
    if net.get("path") == "veth":
        path = ("Paths: client in the root namespace, servers in a namespace behind a veth. "
                "Shared veth (offloads off on both ends, as af_packet needs): stock Redis, "
                "kernel and kernel-poll inreplay on its kernel address, DPDK on af_packet "
                "attached to the same veth")
        paths = doc.get("paths") or []
        if "kernel-default" in paths:
            path += ("; default-offloads veth (TSO/GSO/GRO and checksum offload on, what a "
                     "kernel-stack user gets): the three kernel-stack systems only")
        mtus = doc.get("mtus") or ([net["mtu"]] if net.get("mtu") else [])
        if mtus:
            path += f". MTU {' and '.join(map(str, mtus))} on both veth ends"
        if net.get("delay_us"):
            path += f", netem {net['delay_us']} µs on each end"
        if pin.get("server") is not None:
            path += f"; servers on core {pin['server']}, client on core {pin['client']}"
        path += "."
    else:
        path = "Path: loopback (not the veth)."
    loads = [m[k] for d in docs for m in [d.get("machine", {})]
             for k in ("loadavg_start", "loadavg_end") if m.get(k) is not None]
    out = ["", path]
    if loads:
        out += ["", f"Load average during the runs: {min(loads):.1f} to {max(loads):.1f} on "
                    f"{doc['machine'].get('cpus', '?')} cores (1-minute averages: the "
                    "benchmark's own server, spinning when it busy-polls, and client count "
                    "in them)."]
    missing = [f"- {what} ({d.get('bench', '?')}): not measured: {err.splitlines()[0]}"
               for d in docs for what, err in d.get("errors", {}).items()]
    if missing:
        out += ["", *missing]
    return [*out, "", machine_line(doc)]


def latency_section(doc: dict[str, Any]) -> str:
    lat = Lat(doc)
    kinds = ("ping", "get", "set")
    rows = [r for r in lat.rows if r["kind"] in kinds]
    if not rows:
        return "*The latency benchmark produced no results.*"
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    conns = doc["config"].get("conns", 0)
    out = ["One connection, one request in flight: p50 µs (p99 in brackets) as the client sees "
           "them (send, wait, parse); kernel-poll is inreplay's kernel stack with `--busy-poll`. "
           f"Then {conns} connections pipelined: requests/s (MB/s)."]
    for mtu in lat.mtus:
        cols = lat.columns(mtu, kinds)
        if not cols:
            continue
        out += ["", f"**{mtu_title(mtu)}**, one connection, p50 (p99) µs:", "",
                "| request |" + "".join(f" {col_name(s, p)} |" for s, p in cols),
                "|---|" + "---|" * len(cols)]
        for w in workloads:
            out.append(f"| {w} |" + "".join(f" {lat_cell(lat.get(s, w, p, mtu))} |"
                                             for s, p in cols))
        piped = [w for w in workloads if any(lat.pipe.get((s, w, p, mtu)) for s, p in cols)]
        if piped:
            out += ["", f"**{mtu_title(mtu)}**, {conns} connections pipelined, req/s (MB/s):",
                    "", "| request |" + "".join(f" {col_name(s, p)} |" for s, p in cols),
                    "|---|" + "---|" * len(cols)]
            for w in piped:
                cells = []
                for s, p in cols:
                    x = lat.pipe.get((s, w, p, mtu))
                    cells.append(f"{x['rps']:,.0f} ({x['mbps']:.1f})" if x else "—")
                out.append(f"| {w} |" + "".join(f" {c} |" for c in cells))
    client = [f"{w} {us(c)} µs" for w in workloads if (c := doc["client_us"].get(w)) is not None]
    if client:
        out += ["", "The client's own cost per request (the same loop against a socketpair "
                "whose reply is already there; included above): " + ", ".join(client) + "."]
    out += ["", *[f"- {note}" for note in doc.get("notes", [])]]
    return "\n".join(out + context_lines(doc))


NIC_WORKLOADS = ("GET 64 B", "GET 64 KB", "GET 1 MB", "GET 13 MB", "SAMPLE 512 × 128 B PACKED",
                 "SAMPLE 512 × 28 KB PACKED")


def nics_section(main: dict[str, Any], xdp: dict[str, Any]) -> str:
    """The DPDK system on af_packet (the main run) against af_xdp, same veth and MTU."""
    lat, alt = Lat(main), Lat(xdp)
    pmd = xdp.get("config", {}).get("dpdk_pmd", "af_xdp")
    out = [f"The DPDK server attached to the same veth with two poll-mode drivers, p50 (p99) µs, "
           f"shared path, one connection (`bench/latency.py --dpdk-pmd {pmd}`):", "",
           "| request |" + "".join(f" af_packet, MTU {m} |" for m in lat.mtus)
           + "".join(f" {pmd}, MTU {m} |" for m in alt.mtus), "|---|"
           + "---|" * (len(lat.mtus) + len(alt.mtus))]
    for w in NIC_WORKLOADS:
        cells = [lat_cell(lat.get("dpdk", w, "shared", m)) for m in lat.mtus]
        cells += [lat_cell(alt.get("dpdk", w, "shared", m)) for m in alt.mtus]
        if any(c != "—" for c in cells):
            out.append(f"| {w} |" + "".join(f" {c} |" for c in cells))
    vhost = xdp.get("config", {}).get("vhost_net")
    out.append("\n- virtio_user with the vhost-net backend: "
               + ("/dev/vhost-net exists here but was not measured." if vhost else
                  "not measurable on this machine: there is no /dev/vhost-net (the kernel has "
                  "no vhost_net module and no modules can be loaded)."))
    context = [line.replace("DPDK on af_packet", f"DPDK on {pmd}") for line in context_lines(xdp)]
    return "\n".join(out + context)


MODULE_WORKLOADS = ("PING", "GET 64 B", "GET 64 KB", "GET 1 MB", "GET 13 MB", "SET 13 MB",
                    "SAMPLE 512 × 128 B", "SAMPLE 512 × 128 B PACKED", "SAMPLE 512 × 28 KB",
                    "SAMPLE 512 × 28 KB PACKED", "UPDATE 512")


def module_host_section(doc: dict[str, Any]) -> str:
    """The native server (kernel stack) against stock redis-server hosting
    the same REPLAY.* handlers as a module, same path and MTU, one connection."""
    lat = Lat(doc)
    mtu = lat.mtus[0]
    out = [f"The native server (`kernel`: inreplay on the kernel stack, sleeping in epoll) "
           f"against Debian's stock redis-server hosting the same REPLAY.* handlers as a "
           f"module (`redis-module`: `redis-server --loadmodule \"$(pyctl module-path)\"`), "
           f"shared veth, MTU {mtu}, one connection, p50 (p99) µs (`bench/latency.py --systems "
           f"kernel,redis-module`); module / native below 1: the module host is faster.", "",
           "| request | native | module | module / native (p50) |", "|---|---|---|---|"]
    ratios: dict[str, float] = {}
    for w in MODULE_WORKLOADS:
        n, m = lat.get("kernel", w, "shared", mtu), lat.get("redis-module", w, "shared", mtu)
        if not n and not m:
            continue
        ratio = "—"
        if n and m:
            ratios[w] = m["p50_us"] / n["p50_us"]
            ratio = f"{ratios[w]:.2f}×"
        out.append(f"| {w} | {lat_cell(n)} | {lat_cell(m)} | {ratio} |")
    if not ratios:
        missing = next((x for x in ("redis-module", "kernel")
                        if not any(r["system"] == x for r in lat.rows)), "redis-module")
        why = lat.why_missing(missing, "shared", mtu)
        return f"*The module-host benchmark produced no comparison: {why}.*"
    wins = [w for w, r in ratios.items() if r > 1.0]
    loses = [w for w, r in ratios.items() if r <= 1.0]
    out.append("")
    out.append("- The native server is faster at: " + (", ".join(
        f"{w} ({ratios[w]:.2f}×)" for w in wins) or "nothing measured here") + ".")
    out.append("- It is not at: " + (", ".join(f"{w} ({ratios[w]:.2f}×)" for w in loses)
                                    or "none of these") + ".")
    return "\n".join(out + context_lines(doc))


def sample_shapes(rows: list[Row]) -> list[str]:
    """'32 × 128 B', ..., '512 × 128 B PACKED' in (item size, batch, packed) order."""
    key = sorted((r for r in rows if r["kind"] in ("sample", "sample-packed", "baseline")),
                 key=lambda r: (r["size"], r["batch"], r["kind"] == "sample-packed"))
    return list(dict.fromkeys(r["workload"].split(" ", 1)[1] for r in key))


def sampling_section(doc: dict[str, Any]) -> str:
    lat = Lat(doc)
    rows = [r for r in lat.rows if r["kind"] in ("sample", "sample-packed", "baseline")]
    if not rows:
        return "*The sampling benchmark produced no results.*"
    shapes = sample_shapes(rows)
    out = ["In-network `REPLAY.SAMPLE` against the seed's learner-side baseline (the learner "
           "samples its own sum tree, then fetches the drawn items from stock Redis with one "
           "`MGET`), one connection, p50 µs with in-network / baseline in brackets (below 1: "
           "in-network is faster), both timed end to end as the learner sees them; the "
           "baseline is stock Redis on the same path and MTU. PACKED rows: `REPLAY.SAMPLE ... "
           "PACKED`, one bulk of ids, weights and items (against the same baseline). Tables: "
           + ", ".join(f"{n:,} items of {human(int(size))}"
                       for size, n in doc["config"]["table_items"].items())
           + " (the in-network table and the baseline's keys and tree alike)."]
    n_up = doc["config"]["update_batch"]
    local = lat.local.get(f"local update {n_up}")
    for mtu in lat.mtus:
        for path in lat.paths:
            innet = [s for s in INNET if any(r["system"] == s and r["path"] == path
                                             and r["mtu"] == mtu and r["kind"] == "sample"
                                             for r in rows)]
            base_ok = any(r["system"] == "redis" and r["path"] == path and r["mtu"] == mtu
                          for r in rows)
            if not innet and not base_ok:
                continue
            out += ["", f"**{mtu_title(mtu)}, {PATH_LABEL.get(path, path)}**:", "",
                    "| batch × item | baseline: local tree + MGET (redis) |"
                    + "".join(f" REPLAY.SAMPLE ({s}) |" for s in innet),
                    "|---|---|" + "---|" * len(innet)]
            for shape in shapes:
                base = lat.get("redis", f"BASELINE {shape.removesuffix(' PACKED')}", path, mtu)
                got = [lat.get(s, f"SAMPLE {shape}", path, mtu) for s in innet]
                if not any(got) and (shape.endswith("PACKED") or base is None):
                    continue
                cells = ["—" if shape.endswith("PACKED") else lat_cell(base)]
                cells += [f"{us(r['p50_us'])} ({ratio(p50(r), p50(base))})" if r else "—"
                          for r in got]
                out.append(f"| {shape} | " + " | ".join(cells) + " |")
            for shape in shapes:  # one learner step: sample a batch, update its priorities
                if not shape.startswith(f"{n_up} "):
                    continue
                base = p50(lat.get("redis", f"BASELINE {shape.removesuffix(' PACKED')}",
                                   path, mtu))
                base_step = base + local["p50_us"] if base is not None and local else None
                cells = [us(base_step) if base_step is not None else "—"]
                for s in innet:
                    r = p50(lat.get(s, f"SAMPLE {shape}", path, mtu))
                    u = p50(lat.get(s, f"UPDATE {n_up}", path, mtu))
                    step = r + u if r is not None and u is not None else None
                    cells.append(f"{us(step)} ({ratio(step, base_step)})" if step else "—")
                out.append(f"| step: sample {shape} + update {n_up} (sum of p50s) | "
                           + " | ".join(cells) + " |")
            ups = [(s, lat.get(s, f"UPDATE {n_up}", path, mtu)) for s in innet]
            if local and any(r for _, r in ups):
                out += ["", f"`REPLAY.UPDATE` of {n_up} priorities, p50 (p99) µs: "
                            + ", ".join(f"{s} {lat_cell(r)}" for s, r in ups if r)
                            + f"; the baseline updates its own tree: {lat_cell(local)}, "
                              "no network."]
    pipe_rows = [r for r in doc.get("pipelined", [])
                 if r["kind"] in ("sample", "sample-packed", "baseline")]
    if pipe_rows:
        conns = doc["config"].get("conns", 0)
        limit = doc["config"]["pipeline_max_payload"] / MB
        mtu = lat.mtus[-1]
        path = lat.base_path
        innet = [s for s in INNET if any(r["system"] == s and r["path"] == path
                                         and r["mtu"] == mtu for r in pipe_rows)]
        out += ["", f"{conns} connections pipelined, {mtu_title(mtu)}, "
                    f"{PATH_LABEL.get(path, path)}: requests/s (MB/s of items); batches above "
                    f"{limit:g} MB are not run this way:", "",
                "| batch × item | baseline (redis) |"
                + "".join(f" REPLAY.SAMPLE ({s}) |" for s in innet),
                "|---|---|" + "---|" * len(innet)]
        for shape in shapes:
            got = [lat.pipe.get(("redis", f"BASELINE {shape}", path, mtu))]
            got += [lat.pipe.get((s, f"SAMPLE {shape}", path, mtu)) for s in innet]
            if any(got):
                out.append(f"| {shape} |" + "".join(
                    f" {x['rps']:,.0f} ({x['mbps']:.1f}) |" if x else " — |" for x in got))
    return "\n".join(out + context_lines(doc))


def throughput_section(doc: dict[str, Any]) -> str:
    runs = doc.get("runs") or []
    if not runs:
        return "*The throughput benchmark produced no results.*"
    redis_runs = {(r["test"], r["label"]): r for r in runs if r["system"] == "redis"}
    out = ["`redis-benchmark` on the client core. Client and server CPU: the process's CPU "
           "time over the run's wall time (`/proc/PID/stat`; client CPU near 1 means "
           "redis-benchmark, not the server, set the pace). Cores charged: that for kernel-stack "
           "servers that sleep when idle; 1 for the busy-polling servers (DPDK and "
           "kernel-poll), which spin on their core. \"per core vs redis\" "
           "compares requests/s per charged core.", "",
           "| test | system | req/s | MB/s | p50 ms | p99 ms | client CPU | server CPU "
           "| cores charged | req/s per core | per core vs redis |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        per = r["rps_per_core"]
        base = redis_runs.get((r["test"], r["label"]))
        out.append(f"| {r['test']} {r['label']} | {r['system']} | {r['rps']:,.0f} "
                   f"| {r['mbps']:.1f} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f} "
                   f"| {r['client_cores']:.2f} | {r['server_cores_measured']:.2f} "
                   f"| {r['server_cores']:.2f} "
                   f"| {f'{per:,.0f}' if per else '—'} "
                   f"| {ratio(per, base['rps_per_core'] if base else None)} |")
    out += ["", *[f"- {note}" for note in doc.get("notes", [])]]
    return "\n".join(out + context_lines(doc))


# ---- goals -------------------------------------------------------------------------

VERDICT = {True: "**PASS**", False: "**NOT MET**", None: "**NOT MEASURED**"}


@dataclass
class Goal:
    """One goal with the numbers that decide it."""

    what: str
    ok: bool | None
    measured: str
    mtu: int | None = None
    workload: str | None = None
    """the DPDK workload whose per-stage breakdown explains a miss"""
    dpdk_us: float | None = None
    """the DPDK p50 that was judged"""
    target_us: float | None = None
    """the DPDK p50 that would meet the goal"""

    def line(self) -> str:
        where = f" ({mtu_title(self.mtu)})" if self.mtu else ""
        return f"- {VERDICT[self.ok]} — {self.what}{where}: {self.measured}"


def _vs(a: Row, b: Row) -> str:
    return f"{us(a['p50_us'])} µs vs {us(b['p50_us'])} µs = {a['p50_us'] / b['p50_us']:.2f}×"


def same_wire_goals(lat: Lat, mtu: int) -> list[Goal]:
    """DPDK against kernel-poll on the same wire: the comparison with
    the kernel-default veth (64 KB GSO segments, no checksums) measures the VM's wire,
    this one the stacks."""
    shared = lat.base_path
    out: list[Goal] = []
    for size, ratio in SAME_WIRE_MBPS:
        w = f"GET {human(size)}"
        what = f"DPDK `{w}` MB/s ≥ {ratio:g}× kernel-poll's on the same wire"
        d, k = lat.get("dpdk", w, shared, mtu), lat.get("kernel-poll", w, shared, mtu)
        if d and k:
            q = mbps_p50(d) / mbps_p50(k)
            out.append(Goal(what, q >= ratio,
                            f"{mbps_p50(d):,.1f} vs {mbps_p50(k):,.1f} MB/s = {q:.2f}× "
                            f"(p50 {us(d['p50_us'])} vs {us(k['p50_us'])} µs)", mtu, w,
                            d["p50_us"], k["p50_us"] / ratio))
        else:
            out.append(Goal(what, None, lat.why_missing("dpdk" if not d else "kernel-poll",
                                                        shared, mtu), mtu))
    item, ratio = SAME_WIRE_SAMPLE
    shape = f"{GOAL_BATCH} × {human(item)}"
    what = (f"DPDK `REPLAY.SAMPLE {shape}` p50 ≤ {ratio:g}× kernel-poll's on the same wire, "
            "the better of plain and PACKED on each")

    def best(system: str) -> tuple[str, Row] | None:
        tries = [(lbl, r) for lbl, w in (("plain", f"SAMPLE {shape}"),
                                         ("PACKED", f"SAMPLE {shape} PACKED"))
                 if (r := lat.get(system, w, shared, mtu)) is not None]
        return min(tries, key=lambda x: x[1]["p50_us"]) if tries else None

    d, k = best("dpdk"), best("kernel-poll")
    if d and k:
        out.append(Goal(what, d[1]["p50_us"] <= ratio * k[1]["p50_us"],
                        f"{us(d[1]['p50_us'])} µs ({d[0]}) vs {us(k[1]['p50_us'])} µs ({k[0]}) = "
                        f"{d[1]['p50_us'] / k[1]['p50_us']:.2f}×", mtu, d[1]["workload"],
                        d[1]["p50_us"], ratio * k[1]["p50_us"]))
    else:
        out.append(Goal(what, None, lat.why_missing("dpdk" if not d else "kernel-poll", shared,
                                                    mtu), mtu))
    return out


def latency_goals(lat: Lat, mtu: int | None) -> list[Goal]:
    """The goals judged on bench/latency.py's numbers at one MTU."""
    shared = lat.base_path
    out: list[Goal] = []
    get64 = "GET 64 B"
    d = lat.get("dpdk", get64, shared, mtu)
    for other, limit, name in (("kernel-poll", GOAL_GET_VS_POLL, "kernel-poll's"),
                               ("redis", GOAL_GET_VS_REDIS, "stock Redis's")):
        what = f"DPDK `GET 64 B` p50 ≤ {limit:g}× {name} on the same path"
        b = lat.get(other, get64, shared, mtu)
        if d and b:
            out.append(Goal(what, d["p50_us"] <= limit * b["p50_us"], _vs(d, b), mtu, get64,
                            d["p50_us"], limit * b["p50_us"]))
        else:
            out.append(Goal(what, None, lat.why_missing("dpdk" if not d else other, shared, mtu),
                            mtu))

    for size in GOAL_MBPS_SIZES:
        w = f"GET {human(size)}"
        what = (f"DPDK `{w}` MB/s ≥ {GOAL_MBPS_RATIO:g}× the best kernel-stack system's "
                "(redis, kernel, kernel-poll, either path)")
        d = lat.get("dpdk", w, shared, mtu)
        kern = [(s, p, r) for p in lat.paths for s in KERNEL_STACK
                if (r := lat.get(s, w, p, mtu)) is not None]
        if d and kern:
            s, p, best = max(kern, key=lambda x: mbps_p50(x[2]))
            q = mbps_p50(d) / mbps_p50(best)
            out.append(Goal(what, q >= GOAL_MBPS_RATIO,
                            f"{mbps_p50(d):,.1f} vs {mbps_p50(best):,.1f} MB/s ({col_name(s, p)}) "
                            f"= {q:.2f}× (payload / p50: {us(d['p50_us'])} vs "
                            f"{us(best['p50_us'])} µs)", mtu, w, d["p50_us"],
                            best["p50_us"] / GOAL_MBPS_RATIO))
        else:
            out.append(Goal(what, None, lat.why_missing("dpdk" if not d else "redis", shared,
                                                        mtu), mtu))

    for item, limit in GOAL_SAMPLE:
        shape = f"{GOAL_BATCH} × {human(item)}"
        what = (f"in-network `REPLAY.SAMPLE {shape}` on DPDK ≤ {limit:g}× the learner-side "
                "baseline (stock Redis, same path), the better of plain and PACKED")
        base = lat.get("redis", f"BASELINE {shape}", shared, mtu)
        tries = [(lbl, r) for lbl, w in (("plain", f"SAMPLE {shape}"),
                                         ("PACKED", f"SAMPLE {shape} PACKED"))
                 if (r := lat.get("dpdk", w, shared, mtu)) is not None]
        if base and tries:
            lbl, best = min(tries, key=lambda x: x[1]["p50_us"])
            both = ", ".join(f"{x} {us(r['p50_us'])} µs = "
                             f"{r['p50_us'] / base['p50_us']:.2f}×" for x, r in tries)
            missing = "" if len(tries) == 2 else "; PACKED not measured"
            out.append(Goal(what, best["p50_us"] <= limit * base["p50_us"],
                            f"{both} of the baseline's {us(base['p50_us'])} µs{missing}; "
                            f"judged on {lbl}", mtu, best["workload"], best["p50_us"],
                            limit * base["p50_us"]))
        else:
            out.append(Goal(what, None, lat.why_missing("redis" if not base else "dpdk",
                                                        shared, mtu), mtu))

    if mtu == SAME_WIRE_MTU:
        out += same_wire_goals(lat, mtu)

    what = (f"DPDK `GET 64 B` p50 within {REFERENCE_SLACK:.0%} of the reference "
            f"{REFERENCE_GET_US:g} µs (the DPDK GET 64 B p50 as first measured)")
    d = lat.get("dpdk", get64, shared, mtu)
    limit_us = REFERENCE_GET_US * (1 + REFERENCE_SLACK)
    if d:
        out.append(Goal(what, d["p50_us"] <= limit_us,
                        f"{us(d['p50_us'])} µs (limit {limit_us:.1f} µs, "
                        f"{d['p50_us'] / REFERENCE_GET_US:.2f}× the reference)", mtu, get64,
                        d["p50_us"], limit_us))
    else:
        out.append(Goal(what, None, lat.why_missing("dpdk", shared, mtu), mtu))
    return out


def demo_goal(kernel: dict[str, Any] | None, dpdk: dict[str, Any] | None) -> Goal:
    what = (f"`make demo`-style CartPole run: learner steps/s with the appliance on DPDK ≥ "
            f"{GOAL_DEMO_RATIO:g}× with it on the kernel stack (everything on this machine's "
            "cores)")
    if kernel is None or dpdk is None:
        return Goal(what, None, "no demo summary for the " + ("kernel" if kernel is None
                                                              else "dpdk") + " stack")
    if dpdk.get("stack") != "dpdk":
        return Goal(what, None, f"the DPDK demo ran on the {dpdk.get('stack')} stack (DPDK "
                                "did not start; see its inreplay log)")
    if kernel.get("stack") != "kernel":
        return Goal(what, None, f"the kernel demo ran on the {kernel.get('stack')} stack")
    k, d = kernel.get("learner_steps_per_s") or 0.0, dpdk.get("learner_steps_per_s") or 0.0
    if not k:
        return Goal(what, None, "the kernel-stack demo's learner made no steps")
    return Goal(what, d >= GOAL_DEMO_RATIO * k,
                f"{d:.2f} vs {k:.2f} steps/s = {d / k:.2f}× ({dpdk['learner_steps']:,} and "
                f"{kernel['learner_steps']:,} learner steps in {dpdk.get('wall_s') or 0:.0f} and "
                f"{kernel.get('wall_s') or 0:.0f} s)",
                workload=f"SAMPLE {GOAL_BATCH} × 128 B")


def evaluate_goals(lat: dict[str, Any] | None, demo_kernel: dict[str, Any] | None = None,
                   demo_dpdk: dict[str, Any] | None = None) -> list[Goal]:
    """Every goal, PASS (True), NOT MET (False) or NOT MEASURED (None)."""
    goals: list[Goal] = []
    if lat:
        index = Lat(lat)
        for mtu in index.mtus:
            goals += latency_goals(index, mtu)
    else:
        goals.append(Goal("the latency goals", None, "no bench/latency.py JSON given"))
    goals.append(demo_goal(demo_kernel, demo_dpdk))
    return goals


# ---- per-stage breakdowns (bench/breakdown.py) ----------------------------------------

OUTSIDE = "outside the appliance's loop (client, kernel, veth, waiting for a poll)"
REMEDY = (  # stage name prefix -> what would make it smaller
    ("driver TX", "a NIC the PMD can hand frames to: on af_packet the PMD copies every frame "
                  "into its TX ring, each sendto() has the kernel attach the ring's pages to "
                  "skbs that the veth's crossing into the client's namespace copies again "
                  "(skb_copy_ubufs), and the client's TCP receive, software checksum included "
                  "(offloads are off), runs in the polling thread; a real NIC's PMD sends from "
                  "the mbufs by DMA with checksum offload, and jumbo frames already cut the "
                  "per-frame part six-fold"),
    ("driver RX", "the af_packet RX ring: bigger bursts or a real NIC's PMD"),
    ("lwIP input", "lwIP's per-segment input and ACK work: larger windows with window scaling "
                   "and fewer, larger segments"),
    ("lwIP event", "lwIP's output path for the reply (tcp_output and the frames it builds): "
                   "fewer, larger segments (jumbo frames)"),
    ("reply", "encoding and queueing the reply, where lwIP copies it into its send buffer with "
              "the checksum: tcp_write without the copy flag from pinned values (the checksum "
              "stays), and PACKED for samples"),
    ("execute", "the command itself: the sum-tree draw and gathering the items"),
    ("parse", "the RESP parser and dispatch"),
    ("outside", "the client and the kernel side of the veth, not the appliance: a busy-polling "
                "client or a real NIC"),
)


def remedy(stage: str) -> str:
    return next((r for prefix, r in REMEDY if stage.startswith(prefix)), "")


def stages_with_outside(run: Row) -> dict[str, float]:
    return {**run["stages_us"], OUTSIDE: run["outside_us"]}


def breakdown_runs(doc: dict[str, Any] | None) -> list[Row]:
    """bench/breakdown.py's runs; its older one-run JSON reads as GET 64 B."""
    if not doc:
        return []
    if "runs" in doc:
        return list(doc["runs"])
    return [{"workload": "GET 64 B", "mtu": doc.get("mtu"), **doc}]


def find_breakdown(runs: list[Row], workload: str | None, mtu: int | None) -> Row | None:
    """The run of this workload at this MTU, else at any MTU (None: not measured)."""
    same = [r for r in runs if r["workload"] == workload]
    return next((r for r in same if r.get("mtu") == mtu), same[0] if same else None)


def explain(goal: Goal, run: Row) -> str:
    """One paragraph from the numbers: which stage dominates and what would close the gap."""
    stages = stages_with_outside(run)
    rtt = run["rtt_mean_us"]
    ordered = sorted(stages.items(), key=lambda kv: kv[1], reverse=True)
    (top_full, top_us), (second_full, second_us) = ordered[0], ordered[1]
    top, second = top_full.split(" (")[0], second_full.split(" (")[0]
    share = top_us / rtt if rtt else 0.0
    where = f" at {mtu_title(run.get('mtu'))}" if run.get("mtu") else ""
    text = (f"`{run['workload']}`{where}, {run['requests']:,} requests, mean round trip "
            f"{us(rtt)} µs: the largest stage is **{top_full}**, {us(top_us)} µs ({share:.0%}), "
            f"then {second}, {us(second_us)} µs ({second_us / rtt:.0%}); the appliance's loop "
            f"takes {us(run['appliance_us'])} µs in all.")
    if goal.dpdk_us and goal.target_us and goal.dpdk_us > goal.target_us:
        need = 1 - goal.target_us / goal.dpdk_us
        text += (f" Meeting the goal needs the p50 down from {us(goal.dpdk_us)} to "
                 f"{us(goal.target_us)} µs, {need:.0%} less")
        if share >= need:
            text += (f": removing {need / share:.0%} of {top} alone would do it")
        elif (top_us + second_us) / rtt >= need:
            text += (f", more than all of {top}: it takes {top} and {second} together "
                     f"({(top_us + second_us) / rtt:.0%})")
        else:
            text += (f", more than {top} and {second} together "
                     f"({(top_us + second_us) / rtt:.0%}): it takes cutting nearly every stage")
        text += "."
    hint = remedy(top)
    if hint:
        text += f" What would shrink {top}: {hint}."
    return text


def stage_table(run: Row) -> list[str]:
    rtt = run["rtt_mean_us"]
    out = ["| stage | µs | share of the mean round trip |", "|---|---|---|"]
    for name, v in run["stages_us"].items():
        # a stage computed as a difference can be -1e-13 (floating point): no "-0.00"
        v = round(v, 2) + 0.0
        out.append(f"| {name} | {v:.2f} | {v / rtt * 100:.0f}% |")
    out.append(f"| **in the appliance's loop** | **{run['appliance_us']:.2f}** | "
               f"{run['appliance_us'] / rtt * 100:.0f}% |")
    out.append(f"| {OUTSIDE} | {run['outside_us']:.2f} | {run['outside_us'] / rtt * 100:.0f}% |")
    return out


def goals_section(lat: dict[str, Any] | None, thr: dict[str, Any] | None = None,
                  breakdown: dict[str, Any] | None = None,
                  demo_kernel: dict[str, Any] | None = None,
                  demo_dpdk: dict[str, Any] | None = None) -> str:
    """Each goal with its numbers and PASS / NOT MET; for each goal not met,
    the per-stage breakdown of that workload on DPDK and what it says."""
    goals = evaluate_goals(lat, demo_kernel, demo_dpdk)
    out = ["The latency goals, checked by `bench/report.py` against the numbers below (ratios "
           "of p50s in one run on the same path and MTU; MB/s = payload / p50 of one "
           "connection; \"best kernel\" = the best of stock Redis, kernel and kernel-poll "
           "over both paths at that MTU). The reference for small-request latency is "
           f"{REFERENCE_GET_US:g} µs, DPDK `GET 64 B` p50 as first recorded, before "
           "the DPDK stack's speed work.", ""]
    out += [g.line() for g in goals]
    runs = breakdown_runs(breakdown)
    missed = [g for g in goals if g.ok is False]
    if missed:
        out += ["", "**Where the time goes for each goal not met** (`bench/breakdown.py`: the "
                    "DPDK appliance's own cycle counters for that workload, one connection, in "
                    "a separate run):"]
        shown: set[tuple[str, int | None]] = set()
        for g in missed:
            run = find_breakdown(runs, g.workload, g.mtu)
            where = f" ({mtu_title(g.mtu)})" if g.mtu else ""
            if run is None:
                why = ("no breakdown JSON given" if breakdown is None else
                       f"no breakdown of `{g.workload}` in this run"
                       + "".join(f"; {k}: {v.splitlines()[0]}"
                                 for k, v in (breakdown or {}).get("errors", {}).items()))
                out += ["", f"- {g.what}{where}: {why}."]
                continue
            out += ["", f"- {g.what}{where}: {explain(g, run)}"]
            key = (run["workload"], run.get("mtu"))
            if key not in shown:
                shown.add(key)
                out += ["", *["  " + line for line in stage_table(run)]]
    docs = [d for d in (lat, thr) if d]
    return "\n".join(out + (context_lines(*docs) if docs else []))


def breakdown_section(b: dict[str, Any]) -> str:
    """bench/breakdown.py: each workload on the DPDK path, stage by stage."""
    runs = breakdown_runs(b)
    if not runs:
        errs = "; ".join(f"{k}: {v.splitlines()[0]}" for k, v in b.get("errors", {}).items())
        return f"*The breakdown did not run{': ' + errs if errs else ''}.*"
    first = next((r for r in runs if r["workload"] == "GET 64 B"), runs[0])
    where = f" at {mtu_title(first.get('mtu'))}" if first.get("mtu") else ""
    out = [f"One `{first['workload']}` on the DPDK path{where}, {first['requests']:,} requests "
           f"on one connection: round trip p50 {first['rtt_p50_us']:.1f} µs, mean "
           f"{first['rtt_mean_us']:.1f} µs. The appliance's loop times its stages with the TSC "
           f"(iterations that did work only: {first['work_iterations_per_request']:.1f} per "
           "request); per request:", "", *stage_table(first)]
    if len(runs) > 1:
        out += ["", "Every workload measured this way (µs per request; the largest stage with "
                    "its share of the mean round trip):", "",
                "| workload | MTU | requests | p50 | mean | in the loop | outside it "
                "| largest stage |", "|---|---|---|---|---|---|---|---|"]
        for r in runs:
            top, v = max(stages_with_outside(r).items(), key=lambda kv: kv[1])
            out.append(f"| {r['workload']} | {r.get('mtu') or '—'} | {r['requests']:,} "
                       f"| {us(r['rtt_p50_us'])} | {us(r['rtt_mean_us'])} "
                       f"| {us(r['appliance_us'])} | {us(r['outside_us'])} "
                       f"| {top.split(' (')[0]}: {us(v)} ({v / r['rtt_mean_us']:.0%}) |")
    errs = b.get("errors", {})
    if errs:
        out += ["", *[f"- {k}: not measured: {v.splitlines()[0]}" for k, v in errs.items()]]
    return "\n".join(out)


def demo_section(cartpole: dict[str, Any], breakout: dict[str, Any] | None,
                 kernel: dict[str, Any] | None = None) -> str:
    """The Ape-X results: make demo's CartPole run (also on the kernel stack) and Breakout."""
    c = cartpole
    out = [f"`make demo` on this machine: **{c['env']}** on the **{c['stack']}** stack, "
           f"{c['num_actors']} actors, {'solved' if c['solved'] else 'NOT solved'}: greedy "
           f"evaluation mean {c['eval_return_mean'] or 0:.1f} over {c['eval_episodes']} episodes "
           f"(threshold {c.get('solve_return') or 475:.0f}) after {c['wall_s']:.0f} s of wall "
           f"time, {c['env_frames']:,} environment frames and {c['learner_steps']:,} learner "
           f"steps (parameters v{c.get('eval_params_version', '?')}).", "",
           "![returns](docs/cartpole-returns.png)", "",
           "| run | stack | actors | actor frames/s | learner steps/s | samples/s | batch "
           "| solved |", "|---|---|---|---|---|---|---|---|"]
    rows = [("CartPole-v1 (make demo)", c)]
    if kernel:
        rows.append(("CartPole-v1, `--stack kernel`", kernel))
    if breakout:
        rows.append(("Breakout, 13 MB network", breakout))
    for name, s in rows:
        out.append(f"| {name} | {s['stack']} | {s['num_actors']} | "
                   f"{s['actor_frames_per_s']:,.0f} | {s['learner_steps_per_s']:.2f} | "
                   f"{s['samples_per_s']:,.0f} | {s['batch_size']} "
                   f"| {'yes' if s.get('solved') else 'no'} |")
    if kernel:
        out += ["", demo_goal(kernel, c).line().removeprefix("- ")]
    if breakout:
        out += ["", f"Breakout ran end to end for {breakout['wall_s']:.0f} s with the "
                    f"dueling network of {breakout['model_parameters']:,} parameters "
                    f"({breakout['params_blob_bytes'] / 1e6:.1f} MB as a blob): "
                    f"{breakout['params_version']} parameter versions published, "
                    f"{breakout['learner_steps']} learner steps of batch "
                    f"{breakout['batch_size']} on this CPU-only machine."]
    return "\n".join(out)


def soak_section(s: dict[str, Any]) -> str:
    """bench/soak.py: memory over a long run of inserting and sampling at full speed."""
    b, last = s["baseline"], s["last"]
    verdict = "PASS" if s["passed"] else "FAIL"
    return "\n".join([
        f"{s['minutes']:g} minutes, {s['actors']} inserting processes and one learner at full "
        f"speed against a table of {s['capacity']:,} slots (items of 1-4 KB, MAXBYTES "
        f"{s['maxbytes'] >> 20} MiB), kernel stack: **{verdict}**.", "",
        "| | when the table was full | at the end |", "|---|---|---|",
        f"| time | {b['t']:.0f} s | {last['t']:.0f} s |",
        f"| server RSS | {b['rss'] / 2**20:.1f} MiB | {last['rss'] / 2**20:.1f} MiB "
        f"({s['rss_growth'] * 100:+.1f}%) |",
        f"| used_memory | {b['used_memory'] / 2**20:.1f} MiB | "
        f"{last['used_memory'] / 2**20:.1f} MiB |",
        f"| items inserted | {b['inserts']:,} | {last['inserts']:,} |",
        f"| learner steps (SAMPLE 512 + UPDATE) | {b['learner_steps']:,} | "
        f"{last['learner_steps']:,} |", "",
        f"Rates over the run, for scale (the soak judges memory, not speed): "
        f"{s['inserts_per_s']:,.0f} items inserted/s and "
        f"{s['learner_steps_per_s']:,.0f} learner steps/s (`make soak`).",
    ])


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "NOT MET"


APEX10_TAKEN = 0.995
"""The apex10 phase offers exactly ten times Ape-X's 50,000 inserts/s; a server that
keeps up takes it all, measured over a window that ends with the last reply (about one
round trip, up to 0.2% of a 20 s phase, after the last send): at least this share."""


def swarm_section(doc: dict[str, Any]) -> str:
    """bench/swarm.py: many actors and one learner, on 1 and 2 shards."""
    rows = doc["rows"]
    out = [f"{doc['actors']} actor connections inserting batches of 50, one learner "
           f"running SAMPLE 512 + UPDATE 512 back to back through ShardedReplayClient, "
           f"kernel stack, this {doc['machine_cpus']}-core machine ({doc['note']}). "
           + ("Inserts/s: the shards' REPLAY.INFO counts over the window the actors offered "
              "load (every connection open before it starts; it ends with the last reply)."
              if any("insert_window_s" in r for r in rows) else ""), "",
           "| item | shards | phase | inserts/s (per shard) | learner batches/s | "
           "vs learner alone | SAMPLE p50 / p99 | insert p50 / p99 |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        per = " + ".join(f"{x:,}" for x in r["inserts_per_s_per_shard"])
        ins = f"{r['inserts_per_s']:,} ({per})" if r["shards"] > 1 else f"{r['inserts_per_s']:,}"
        ins_lat = (f"{r['insert_p50_ms']:.2f} / {r['insert_p99_ms']:.2f} ms"
                   if "insert_p99_ms" in r else "")
        vs = f"{r['learner_vs_alone']:.2f}x" if "learner_vs_alone" in r else ""
        out.append(f"| {human(r['item_bytes'])} | {r['shards']} | {r['phase']} | {ins} | "
                   f"{r['sample_batches_per_s']:,.1f} | {vs} | {r['sample_p50_ms']:.2f} / "
                   f"{r['sample_p99_ms']:.2f} ms | {ins_lat} |")
    trajs = [r for r in rows if r["phase"] == "traj"]
    if trajs:
        out += ["", "The traj phase: each actor connection appends 50 steps (an "
                    "item-sized frame, an action, a reward) to its episode stream and creates 47 "
                    "3-step transitions over them (obs, next_obs, action, 3 rewards) in one round "
                    "trip, as fast as the server takes them; the learner samples 512 transitions "
                    "assembled by the server (sample_trajectories across the group). inserts/s "
                    "counts transitions. Chunk memory per transition held: "
                + "; ".join(f"{r['shards']} shard{'s' if r['shards'] > 1 else ''}, "
                            f"{human(r['item_bytes'])} frames: {r['bytes_per_transition']:,.1f} B"
                            for r in trajs if "bytes_per_transition" in r) + "."]
    out += ["", "Goals:"]

    def find(shards: int, phase: str, item: int = 128) -> dict[str, Any] | None:
        return next((r for r in rows if r["shards"] == shards and r["phase"] == phase
                     and r["item_bytes"] == item), None)

    for shards in sorted({r["shards"] for r in rows}):
        for ph, how in (("apex10", "actors offering ten times Ape-X's rate"),
                        ("max", "actors as fast as the server takes them")):
            mx = find(shards, ph)
            if not mx:
                continue
            offered = mx.get("target_inserts_per_s")
            if ph == "apex10" and offered:
                # offered exactly 500,000/s, a server that keeps up measures 500,000 give or
                # take the window's last round trip: the goal is that it took what was offered
                took = (f"the actors offered {offered:,} inserts/s and the shards took "
                        f"{mx['inserts_per_s']:,} (goal: all of it, ≥ "
                        f"{APEX10_TAKEN:.1%} for the last round trip in the window)")
                ins_ok = offered >= 500_000 and mx["inserts_per_s"] >= APEX10_TAKEN * offered
            else:
                took = f"{mx['inserts_per_s']:,} inserts/s (goal ≥ 500,000)"
                ins_ok = mx["inserts_per_s"] >= 500_000
            ok = ins_ok and mx["sample_batches_per_s"] >= 19 and mx["sample_p99_ms"] <= 10
            out.append(f"- **{_verdict(ok)}** ({shards} shard{'s' if shards > 1 else ''}, {how}) "
                       f"— ten times Ape-X's load: {took} while the learner runs "
                       f"{mx['sample_batches_per_s']:,.1f} batches/s (≥ 19) with SAMPLE p99 "
                       f"{mx['sample_p99_ms']:.2f} ms (≤ 10 ms)")
        ap = find(shards, "apex")
        if ap and "learner_vs_alone" in ap:
            out.append(f"- **{_verdict(ap['learner_vs_alone'] >= 0.9)}** ({shards} "
                       f"shard{'s' if shards > 1 else ''}) — at Ape-X's own load "
                       f"({ap['inserts_per_s']:,} inserts/s) the learner keeps "
                       f"{ap['learner_vs_alone']:.3f}x of its batch rate alone (goal ≥ 0.90x)")
    one, two = find(1, "learner"), find(2, "learner")
    if one and two:
        ratio_ = two["sample_p50_ms"] / one["sample_p50_ms"]
        out.append(f"- **{_verdict(ratio_ <= 1.3)}** — SAMPLE 512 across 2 shards "
                   f"{two['sample_p50_ms']:.3f} ms = {ratio_:.2f}x of one shard's "
                   f"{one['sample_p50_ms']:.3f} ms (p50, learner alone; goal ≤ 1.3x)")
    return "\n".join(out)


def compress_section(doc: dict[str, Any]) -> str:
    """bench/compress.py: compressed Atari transitions on real Breakout frames."""
    c = doc["codec"]
    out = [f"{c['transitions']:,} transitions of real {doc['env']} play ({doc['policy']}), "
           f"{c['frames_per_transition']} distinct 84×84 frames each (obs and next_obs share "
           f"their overlap), zstd level {c['zstd_level']}:", "",
           "| | bytes per transition | encode µs/frame | decode µs/frame |", "|---|---|---|---|",
           f"| raw | {c['raw_bytes']:,} | | |"]
    for lv in c["levels"]:
        out.append(f"| zstd {lv['level']} | {lv['bytes_mean']:,.0f} | "
                   f"{lv['encode_us_per_frame']:.1f} | {lv['decode_us_per_frame']:.1f} |")
    out += ["", f"Stored (zstd {c['zstd_level']}, 8-byte aligned in the arena): mean "
            f"{c['zstd_stored_bytes']['mean']:,.0f} B, p99 {c['zstd_stored_bytes']['p99']:,.0f} B "
            f"({c['ratio']:.0f}× smaller than raw); 2,000,000 transitions take "
            f"{doc['capacity_2m_gib']:.2f} GiB.", "",
            "| learner path (sample + decode + to_torch) | decode threads | transitions/s |",
            "|---|---|---|"]
    for r in doc["learner"]:
        out.append(f"| {r['format']} | {r['decode_threads_used']} | "
                   f"{r['transitions_per_s']:,.0f} |")
    g = doc["goals"]
    out += ["", f"- **{_verdict(g['bytes_per_transition']['met'])}** — Breakout transitions "
            f"stored at {g['bytes_per_transition']['measured']:,.0f} B on average (goal ≤ 8 KB)",
            f"- **{_verdict(g['learner_transitions_per_s']['met'])}** — the learner decodes "
            f"{g['learner_transitions_per_s']['measured']:,.0f} transitions/s (goal ≥ 10,000)"]
    return "\n".join(out)


SAMPLE_GOAL_US, UPDATE_GOAL_US = 25.0, 15.0  # server time of 512 items of 128 B at 2M items
LAYOUT_GOAL = 0.75
"""A candidate layout's SAMPLE 512 floor over today's layout's, measured in the same run."""
AT_FLOOR_GOAL = 1.2
"""The server's time over its layout's floor, in every round."""
AT_FLOOR_ROUNDS = 5
"""Interleaved rounds the server-at-floor goal asks for."""
LAYOUT_CAUSE = ("tree lines per draw fixed by exactness: the K = 8 sums must stay "
                "byte-identical, so the tree's levels cannot be merged")
TODAY = "today"
"""memfloor's name for the layout the engine has (the server's own floor)."""


def layout_goal(floor: list[dict[str, Any]]) -> Goal:
    """Lower the floor: the best of memfloor's candidate layouts (--layout all) against
    today's, as the median over the rounds of their ratio in the same run, at the table
    size where the candidate does worst. None (NOT MEASURED) without candidates; bounds
    (layouts that keep less than a table must) are printed beside it, never judged."""
    ratios: dict[str, dict[int, list[float]]] = {}
    bounds: dict[str, dict[int, list[float]]] = {}
    for f in floor:
        lays = f.get("layouts") or {}
        if TODAY not in lays or f.get("in_cache"):  # an in-cache table shows no layout
            continue
        for name, lay in lays.items():
            if name != TODAY:  # a bound keeps less than a table must: shown, not judged
                (bounds if lay.get("bound") else ratios).setdefault(name, {}).setdefault(
                    f["items"], []).append(lay["sample_us"] / lays[TODAY]["sample_us"])
    what = (f"the best candidate layout's SAMPLE 512 floor ≤ {LAYOUT_GOAL:g}× today's "
            "layout's (bench/memfloor --layout all, same passes)")
    if not ratios:
        return Goal(what, None, "no candidate layouts in this run's floor")
    med = {name: {n: statistics.median(v) for n, v in sorted(by.items())}
           for name, by in ratios.items()}
    best = min(med, key=lambda name: max(med[name].values()))
    worst = max(med[best].values())
    ok = worst <= LAYOUT_GOAL
    sizes = ", ".join(f"{r:.2f}× at {n:,} items" for n, r in med[best].items())
    rounds = max(len(v) for v in ratios[best].values())
    measured = f"{best} {sizes} (median of {rounds} rounds)"
    others = sorted((max(m.values()), name) for name, m in med.items() if name != best)
    if others:
        measured += "; next " + ", ".join(f"{name} {r:.2f}×" for r, name in others[:3])
    for name, by in sorted(bounds.items()):
        r = max(statistics.median(v) for v in by.values())
        measured += f"; {name} (a bound, not a layout) {r:.2f}×"
    if not ok:
        measured += f"; cause: {LAYOUT_CAUSE}"
    return Goal(what, ok, measured)


def _sample_us(r: dict[str, Any]) -> float:
    """The server's SAMPLE 512: the better of PACKED and plain."""
    return float(min(r["packed_us"], r["plain_us"]))


def _sample_floor(f: dict[str, Any]) -> float:
    """SAMPLE 512's floor in today's layout: only its loads."""
    return float(((f.get("layouts") or {}).get(TODAY) or f)["sample_us"])


def _update_floor(f: dict[str, Any]) -> float:
    """UPDATE 512's floor in today's layout: its tree path read and written, its pow()."""
    return float(((f.get("layouts") or {}).get(TODAY) or f)["update_us"] + f["pow_us"])


def _native_rows(doc: dict[str, Any], in_cache: bool) -> list[dict[str, Any]]:
    """The first tree's native rows, of the in-cache table or of the others."""
    rows = [r for r in doc.get("rows", []) if not r["tree"].endswith("+module")
            and bool(r.get("in_cache")) == in_cache]
    return [r for r in rows if r["tree"] == rows[0]["tree"]] if rows else []


def own_work(doc: dict[str, Any]) -> dict[str, float] | None:
    """The commands' own work, without their misses: on the in-cache table
    (bench/server_time.py --in-cache), the medians over the rounds of the server's time
    and of the floor's (loads; UPDATE's with its pow() calls). None without that table."""
    rows = _native_rows(doc, True)
    floors = [f for f in doc.get("floor", []) if f.get("in_cache")]
    if not rows or not floors:
        return None
    return {"items": rows[0]["items"],
            "sample_us": statistics.median(_sample_us(r) for r in rows),
            "sample_floor_us": statistics.median(_sample_floor(f) for f in floors),
            "update_us": statistics.median(r["update_us"] for r in rows),
            "update_floor_us": statistics.median(_update_floor(f) for f in floors)}


def _own_work_cause(work: dict[str, float] | None, cmd: str, floor_us: float) -> str:
    """Why a command does not sit on its floor, from the in-cache table: the work its
    floor leaves out, against the room the goal leaves above the floor."""
    if work is None:
        return ("; cause not measured: no in-cache table in this run "
                "(bench/server_time.py --in-cache)")
    mine, theirs = work[f"{cmd}_us"], work[f"{cmd}_floor_us"]
    left_out = ("the descent's compares, the random points, the weights and the reply"
                if cmd == "sample" else
                "the priorities' checks, the tree's sums and the table's bookkeeping")
    return (f"; cause: the command's own work, not its misses: on a table of "
            f"{work['items']:,} items, whose lines stay in the caches, it takes {mine:.1f} µs "
            f"where its floor takes {theirs:.1f} µs, so {mine - theirs:.1f} µs of {left_out} "
            f"that the floor leaves out; at the worst round's floor ({floor_us:.1f} µs) that "
            f"work alone is {(mine - theirs) / floor_us:.2f}× the floor where the goal leaves "
            f"{AT_FLOOR_GOAL - 1:.2f}×, so the goal needs that work cut or hidden under the "
            f"misses")


def at_floor_goals(doc: dict[str, Any]) -> list[Goal]:
    """Sit on the floor: the server's REPLAY.SAMPLE 512 (the better of PACKED and plain)
    and REPLAY.UPDATE 512 over the floor memfloor measured for today's layout in the same
    round at the same size (UPDATE's: its tree path plus its pow() calls), in every round
    and at every size of the first tree's native rows (the in-cache table's aside); PASS
    when the worst is within AT_FLOOR_GOAL and there were at least AT_FLOOR_ROUNDS
    rounds. A NOT MET names its cause from the in-cache table (own_work)."""
    rows = _native_rows(doc, False)
    floor = {(f["round"], f["items"]): f for f in doc.get("floor", []) if not f.get("in_cache")}
    work = own_work(doc)
    out = []
    for cmd, what, mine, theirs in (
            ("sample", "REPLAY.SAMPLE 512 (the better of PACKED and plain)", _sample_us,
             _sample_floor),
            ("update", "REPLAY.UPDATE 512", lambda r: r["update_us"], _update_floor)):
        goal = (f"server time of {what} ≤ {AT_FLOOR_GOAL:g}× today's layout's floor of the "
                f"same round, in every round (at least {AT_FLOOR_ROUNDS})")
        ratios = [(mine(r) / theirs(floor[r["round"], r["items"]]), r["round"], r["items"])
                  for r in rows if (r["round"], r["items"]) in floor]
        if not ratios:
            out.append(Goal(goal, None, "no floor measured beside the server"))
            continue
        worst, rnd, items = max(ratios)
        rounds = len({r for _, r, _ in ratios})
        ok = worst <= AT_FLOOR_GOAL and rounds >= AT_FLOOR_ROUNDS
        measured = (f"worst {worst:.2f}× (round {rnd}, {items:,} items), median "
                    f"{statistics.median(x for x, _, _ in ratios):.2f}× over {rounds} rounds")
        if rounds < AT_FLOOR_ROUNDS:
            measured += f"; only {rounds} rounds, the goal asks for {AT_FLOOR_ROUNDS}"
        if worst > AT_FLOOR_GOAL:
            measured += _own_work_cause(work, cmd, theirs(floor[rnd, items]))
        out.append(Goal(goal, ok, measured))
    return out


def server_sample_section(doc: dict[str, Any]) -> str:
    """Server time of REPLAY.SAMPLE/UPDATE 512 per call (bench/server_time.py), medians over
    the rounds, and the goals judged at the largest table."""
    by: dict[int, dict[str, list[float]]] = {}
    for r in doc["rows"]:
        d = by.setdefault(r["items"], {"packed": [], "plain": [], "update": []})
        for k in d:
            d[k].append(r[f"{k}_us"])
    lines = ["Server time per call from INFO commandstats (usec_per_call) over "
             f"{doc['calls']} calls on one connection, items of "
             f"{doc['rows'][0]['item_bytes']} B, kernel stack; median of the rounds.", "",
             "| items | SAMPLE 512 PACKED µs | SAMPLE 512 µs | UPDATE 512 µs |",
             "|---|---|---|---|"]
    med = {n: {k: statistics.median(v) for k, v in d.items()} for n, d in sorted(by.items())}
    cached = {r["items"] for r in doc["rows"] if r.get("in_cache")}
    for n, m in med.items():
        tag = " (in cache)" if n in cached else ""
        lines.append(f"| {n:,}{tag} | {m['packed']:.1f} | {m['plain']:.1f} | "
                     f"{m['update']:.1f} |")
    top = max((n for n in med if n not in cached), default=max(med))  # the goals' size
    best = min(med[top]["packed"], med[top]["plain"])
    upd = med[top]["update"]
    floor = [f for f in doc.get("floor", []) if f["items"] == top]
    sample_cause = update_cause = ""
    if floor:
        fs, ft, fu, fp = (statistics.median(f[k] for f in floor)
                          for k in ("sample_us", "tree_us", "update_us", "pow_us"))
        sample_cause = f"; this machine's floor for the same reads is {fs:.1f} µs"
        update_cause = f"; this machine's floor for the same work is {fu + fp:.1f} µs"
    lines += ["",
              f"- {VERDICT[best <= SAMPLE_GOAL_US]} — server time of REPLAY.SAMPLE 512 at "
              f"{top:,} items ≤ {SAMPLE_GOAL_US:g} µs (the better of PACKED and plain): "
              f"{best:.1f} µs{sample_cause}",
              f"- {VERDICT[upd <= UPDATE_GOAL_US]} — server time of REPLAY.UPDATE "
              f"512 ≤ {UPDATE_GOAL_US:g} µs: {upd:.1f} µs{update_cause}"]
    if floor:  # the layout's goals: lower the floor, then sit on it
        lines += [g.line() for g in at_floor_goals(doc)]
        if any("layouts" in f for f in doc["floor"]):
            lines.append(layout_goal(doc["floor"]).line())
    if floor:
        f0 = floor[0]
        # the items' own lines, which any server copying them out must load (memfloor from
        # 2026-11-29 on; older JSON has no items_us)
        items_part = (f", the items' own lines alone "
                      f"{statistics.median(f['items_us'] for f in floor):.1f} µs"
                      if all("items_us" in f for f in floor) else "")
        lines += ["", f"The floor, measured in the same run by bench/memfloor.c (median of "
                  f"{len(floor)}): only reading the cache lines a SAMPLE {f0['batch']} must read "
                  f"at {top:,} items (each draw's path through a K = {f0['fanout']} tree of "
                  f"depth {f0['depth']}, its slot record and its {f0['item_bytes']} B item), "
                  f"every address known in advance and nothing else done, takes {fs:.1f} µs "
                  f"(the tree path alone {ft:.1f} µs{items_part}); UPDATE's tree path read and "
                  f"written back "
                  f"takes {fu:.1f} µs and its {f0['batch']} libm pow() calls {fp:.1f} µs. The "
                  f"goals are {SAMPLE_GOAL_US / fs:.2f}× and {UPDATE_GOAL_US / (fu + fp):.2f}× "
                  f"that floor; the server takes {best / fs:.2f}× and {upd / (fu + fp):.2f}×."]
        below = [what for what, x in (("SAMPLE", best / fs), ("UPDATE", upd / (fu + fp)))
                 if x < 1]
        if below:  # an estimate the server beats is no bound: say so rather than imply one
            verb = "beats" if len(below) == 1 else "beat"
            lines[-1] += (f" The server's {' and '.join(below)} {verb}"
                          f" this estimate here, so on this machine it is not a lower bound.")
    lines += ["", f"Load average at the end: {doc['machine']['loadavg_end']:.1f} on "
              f"{doc['machine']['cpus']} cores (commandstats times stretch when other work "
              "shares the server's core).", "", machine_line(doc)]
    return "\n".join(lines) + "\n"


def limiter_section(doc: dict[str, Any]) -> str:
    """bench/limiter.py: the rate limiter under a 10x imbalance each way."""
    c = doc["config"]
    minutes = c["seconds"] / 60
    out = [f"{minutes:g} minutes against one table with SAMPLES_PER_INSERT "
           f"{c['samples_per_insert']:g}, MIN_SIZE {c['min_size']:,}, "
           f"ERROR_BUFFER {c['error_buffer']:g}: "
           f"{c['imbalance']}; {len(doc['clients'])} clients, kernel stack.", "",
           "| client | calls | items | timeouts | longest wait |", "|---|---|---|---|---|"]
    for cl in doc["clients"]:
        out.append(f"| {cl['name']} | {cl['calls']:,} | {cl['items']:,} | {cl['timeouts']} | "
                   f"{cl['longest_gap_s']:.2f} s |")
    ok = doc["within_10_percent"] and not doc["deadlocked_windows"] and not doc["starved"]
    out += ["", f"Measured samples per insert over the run: "
            f"{doc['measured_samples_per_insert']:.3f}; the largest deviation of a "
            f"{c['window_s']:g} s window: "
            f"{doc['max_window_deviation'] * 100:.1f}%; {doc['deadlocked_windows']} windows "
            f"without progress, {len(doc['starved'])} starved clients, {doc['timeouts']} timeouts.",
            "", f"- **{_verdict(ok)}** — under a 10× imbalance the measured samples per insert "
            f"stays within ±10% of the configured rate ({doc['max_window_deviation'] * 100:.1f}% "
            f"at worst) over {minutes:g} minutes, with no deadlock and no client starved"]
    return "\n".join(out)


def params_section(doc: dict[str, Any]) -> str:
    """bench/params.py: a 13 MB Adam and RMSprop step against its memory floor, and
    pushes/s from N workers against a Ray actor applying torch.optim.Adam."""
    st, fl, pu = doc["step"], doc["floor"], doc["pushes"]
    mb = doc["bytes"] / 1e6
    load = doc.get("machine", {}).get("loadavg") or [0.0]
    out = [f"{doc['n']:,} float32 ({mb:.1f} MB), {doc['machine']['cpus']} CPUs, load average "
           f"{load[0]:.1f} at the end of the run (other work shares these cores).", "",
           "| step | server time (PARAM.PUSH) | param.c alone | memory floor | ratio |",
           "|---|---|---|---|---|"]
    for opt in ("adam", "rmsprop"):
        out.append(f"| {opt} | {st[opt + '_server_ms']:.2f} ms | {fl[opt + '_step_ms']:.2f} ms | "
                   f"{fl[opt + '_floor_ms']:.2f} ms ({fl[opt + '_bytes'] / 1e6:.0f} MB streamed) | "
                   f"{doc[opt + '_ratio']:.2f}× |")
    out += ["", f"| {doc['workers']} workers, {doc['seconds']:g} s each | pushes | pushes/s |",
            "|---|---|---|"]
    names = {"inreplay": "inreplay PARAM.PUSH (same-host shared memory)",
             "inreplay_tcp": "inreplay PARAM.PUSH (TCP)",
             "ray_torch": "Ray actor, torch.optim.Adam"}
    for k, row in pu.items():
        out.append(f"| {names.get(k, k)} | {row['pushes']:,} | {row['pushes_per_s']:.1f} |")
    torch_ms = pu.get("ray_torch", {}).get("torch_step_ms")
    if torch_ms:
        out += ["", f"The Ray actor's torch.optim.Adam step alone: {torch_ms:.1f} ms."]
    g = doc["goals"]
    out += ["",
            f"- **{_verdict(g['adam_step'])}** — Adam step within 1.5× its memory floor "
            f"({doc['adam_ratio']:.2f}×)",
            f"- **{_verdict(g['rmsprop_step'])}** — RMSprop step within 1.5× its memory floor "
            f"({doc['rmsprop_ratio']:.2f}×)",
            f"- **{_verdict(g['pushes'])}** — at least 2× the Ray/torch parameter server's "
            f"pushes/s at {mb:.1f} MB ({doc['push_ratio']:.2f}×)"]
    return "\n".join(out)


def redis_suite_section(doc: dict[str, Any]) -> str:
    """tests/redis_suite/run.py: Redis 7.0.15's own unit tests against inreplay."""
    servers = doc["servers"]
    ours = [k for k in ("kernel", "dpdk") if "vs_stock" in servers.get(k, {})]
    head = "| unit | stock redis-server passes | " + " | ".join(
        f"inreplay ({k}) passes of those" for k in ours) + " |"
    out = [f"Redis {doc.get('redis_version', '7.0.15')}'s unit tests in external-server mode "
           f"(`make redis-suite`), one fresh server per unit; the figure is the share of the "
           f"tests stock redis-server passes that inreplay passes too. The skip-list holds "
           f"{doc.get('skiplist_entries', 0)} tests, each with its reason "
           f"(`tests/redis_suite/skiplist.txt`).", "", head,
           "|---|---|" + "---|" * len(ours)]
    units = list(servers[ours[0]]["vs_stock"]["units"]) if ours else []
    for unit in units:
        first = servers[ours[0]]["vs_stock"]["units"][unit]
        cells = []
        for k in ours:
            u = servers[k]["vs_stock"]["units"][unit]
            cells.append(f"{u['passed']} ({100 * (u['ratio'] or 0):.0f}%)")
        out.append(f"| {unit} | {first['stock_passed']} | " + " | ".join(cells) + " |")
    totals = [servers[k]["vs_stock"] for k in ours]
    if ours:
        out.append(f"| **all** | **{totals[0]['stock_passed']}** | " + " | ".join(
            f"**{t['passed']} ({100 * t['ratio']:.1f}%)**" for t in totals) + " |")
    out.append("")
    for k, t in zip(ours, totals, strict=True):
        out.append(f"- **{_verdict(t['ratio'] >= doc['goal'])}** ({k}) — at least "
                   f"{100 * doc['goal']:.0f}% of the tests stock "
                   f"redis-server passes: {100 * t['ratio']:.1f}% ({t['passed']} of "
                   f"{t['stock_passed']})")
        causes = servers[k].get("failure_causes") or []
        if isinstance(causes, dict):
            causes = list(causes.items())
        if causes:
            top = sorted(causes, key=lambda kv: -int(kv[1]))[:6]
            out.append("  - the most common failures of the rest: " + "; ".join(
                f"`{str(name)[:70]}` ({n})" for name, n in top))
        unknown = servers[k].get("unknown_commands") or {}
        if unknown:
            names = ", ".join(c.upper() for c in list(unknown)[:12])
            out.append(f"  - commands the tests send that inreplay leaves out of scope: {names}")
    return "\n".join(out)


SERVER_TIME_WORKLOADS = ("PING", "GET 64 B", "SAMPLE 512 × 128 B PACKED", "SAMPLE 512 × 128 B",
                         "UPDATE 512")
"""Workloads whose server time per call (INFO commandstats) the report keeps run to run."""


def server_times(doc: dict[str, Any] | None) -> dict[tuple[str, str, int, str], float]:
    """(system, path, mtu, workload) -> server µs per call, from latency.py's rows."""
    out: dict[tuple[str, str, int, str], float] = {}
    for r in (doc or {}).get("latency", []):
        if r.get("server_us") is not None and r["workload"] in SERVER_TIME_WORKLOADS:
            out[(r["system"], r["path"], r["mtu"], r["workload"])] = r["server_us"]
    return out


def _prev_run(prev: dict[str, Any]) -> str:
    """Which run the bracketed figures come from: its commit, when the JSON records it."""
    c = prev.get("commit")
    return f"commit {c}" if c else "a run that recorded no commit"


SERVER_TIME_FROM_README = "readme"
"""`source` of a previous run read back from the docs' own server-time block."""


def server_times_from_readme(text: str) -> dict[str, Any] | None:
    """The previous run's server times as the docs' server-time block printed them
    (each cell's first figure), in --latency JSON's shape: a clean clone has no JSON of
    the last run, but the page it checks out is that run's report. None when the block
    has no figures. The commit is the one the block names ("this run (commit ...)")."""
    m = section_pattern("server-time").search(text)
    if not m:
        return None
    block = m.group(2)
    rows: list[dict[str, Any]] = []
    head: list[str] | None = None
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or set("".join(cells)) <= set("-"):
            continue
        if cells[:3] == ["system", "path", "MTU"]:
            head = cells[3:]
            continue
        if head is None or len(cells) != 3 + len(head) or not cells[2].isdigit():
            continue
        for workload, cell in zip(head, cells[3:], strict=True):
            fig = re.match(r"(\d+(?:\.\d+)?)", cell)
            if fig and workload in SERVER_TIME_WORKLOADS:
                rows.append({"system": cells[0], "path": cells[1], "mtu": int(cells[2]),
                             "workload": workload, "server_us": float(fig.group(1))})
    if not rows:
        return None
    doc: dict[str, Any] = {"latency": rows, "source": SERVER_TIME_FROM_README}
    c = re.search(r"this run \(commit ([^)\s]+)\)", block)
    if c:
        doc["commit"] = c.group(1)
    return doc


def server_time_section(doc: dict[str, Any], prev: dict[str, Any] | None) -> str:
    """Per-command server time (µs per call, INFO commandstats over the timed requests of
    one connection, shared path), this run beside the previous run's figure."""
    now, before = server_times(doc), server_times(prev)
    keys = sorted({(k[0], k[1], k[2]) for k in now}, key=lambda k: (k[2], k[1], k[0]))
    if not keys:
        return ("*No server times in this run (bench/latency.py records them from "
                "INFO commandstats).*")
    this = f"this run (commit {doc['commit']})" if doc.get("commit") else "this run"
    if prev is None:
        whence = "(none kept: first run here)."
    elif prev.get("source") == SERVER_TIME_FROM_README:
        run = f"commit {prev['commit']}, " if prev.get("commit") else ""
        whence = f"({run}read back from the page's block this run replaced)."
    else:
        whence = f"({_prev_run(prev)}, from the JSON make bench kept)."
    out = ["Server time per command (µs per call from INFO commandstats over the timed "
           f"requests, one connection): {this}, and in brackets the previous run's {whence}",
           "", "| system | path | MTU | " + " | ".join(SERVER_TIME_WORKLOADS) + " |",
           "|---|---|---|" + "---|" * len(SERVER_TIME_WORKLOADS)]
    for sysname, path, mtu in keys:
        cells = []
        for w in SERVER_TIME_WORKLOADS:
            v, p = now.get((sysname, path, mtu, w)), before.get((sysname, path, mtu, w))
            prev_cell = f" ({p:.2f})" if p is not None else ""
            cells.append("—" if v is None else f"{v:.2f}{prev_cell}")
        out.append(f"| {sysname} | {path} | {mtu} | " + " | ".join(cells) + " |")
    return "\n".join(out)


PEER_GOALS = ((128, 5.0), (640, 5.0), (28224, 3.0))
"""(item bytes, inreplay's learner batches/s at least this many times Reverb's)."""
PEER_INSERT_GOAL = 3.0
PEER_MEMCPY_GOAL = 1.5
PEER_CLIENT_ADD_GOAL_MBPS = 1000.0
PEER_SHM = ("inreplay-shm", "inreplay-shm-poll")
"""bench/peers.py's systems on the same-host shared-memory rings."""
PEER_NET = ("inreplay-kernel", "inreplay-kernel-poll", "inreplay-dpdk")
"""inreplay over the network stacks (kernel TCP, DPDK), whose figures the shm runs must keep."""
PEER_QUEUE_GOAL = 1.5
"""QUEUE items/s on the shm path at least this many times echo's."""
PEER_REGRESSION = 0.95
"""The TCP and DPDK figures at least this fraction of the previous run's."""
PEER_PATHS = ("path: which way a figure's bytes went. shm rings (same host): the server's "
              "shared-memory request and reply rings, set up through its shm socket, no TCP; "
              "kernel TCP: Linux's stack (loopback, or the veth); DPDK + lwIP: the DPDK stack "
              "on the veth (af_packet); in-process: no server, the buffer in the learner's "
              "process (cpprb's MP form shares memory with forked actors); Ray actor: a buffer "
              "in another process reached through Ray.")


def _apex_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("workload", "apex") == "apex"]


def _peer_row(rows: list[dict[str, Any]], system: str, size: int) -> dict[str, Any] | None:
    return next((r for r in rows if r["system"] == system and r["item_bytes"] == size), None)


def _best_inreplay(rows: list[dict[str, Any]], size: int, key: str,
                   shm: bool = False) -> dict[str, Any] | None:
    """inreplay's best row at size: over the network (TCP or DPDK), or with shm=True on
    the same-host shared-memory rings."""
    mine = [r for r in rows if r["system"].startswith("inreplay") and r["item_bytes"] == size
            and r.get(key) is not None and (r["system"] in PEER_SHM) == shm]
    return max(mine, key=lambda r: r[key]) if mine else None


def _split(r: dict[str, Any], rows: list[dict[str, Any]] | None = None) -> str:
    """Where a learner batch's time goes, from the measured server CPU per item (a
    busy-polling server's CPU is all spinning: inreplay-kernel's row of the same size says
    it instead)."""
    if rows is not None and r["system"].endswith(("-poll", "-dpdk")):
        base = "inreplay-shm" if r["system"] in PEER_SHM else "inreplay-kernel"
        plain = _peer_row(rows, base, r["item_bytes"])
        if plain is not None:
            return (f"; {r['system']} busy-polls (its CPU includes spinning), and on "
                    f"{base} at {human(r['item_bytes'])} ({plain['batches_per_s']:,.1f}"
                    f" batches/s)" + _split(plain)[1:])
    per = r.get("server_cpu_us_per_item")
    if per is None or not r.get("batches_per_s"):
        return ""
    batch_us = 1e6 / r["batches_per_s"]
    moved = r["inserts_per_s"] + r["batches_per_s"] * 512
    busy = per * moved / 1e6
    if r["system"].endswith(("-poll", "-dpdk")):  # it spins: its CPU is not its work
        return (f"; {r['system']} busy-polls, so its CPU ({per:.2f} µs per item moved) "
                f"includes spinning and says nothing of where the {batch_us:,.0f} µs per "
                f"learner batch went")
    return (f"; the server was busy {busy:.0%} of the time ({per:.2f} µs of CPU per item "
            f"moved), so the {batch_us:,.0f} µs per learner batch went mostly to "
            + ("the server" if busy > 0.8 else "the clients' side (Python actors and learner "
               "sharing their core, " + ("their copies into and out of the rings)"
                                         if r["system"] in PEER_SHM
                                         else "the kernel's TCP transfer)")))


def _peers_load(m: dict[str, Any]) -> str:
    """The run's load averages, which include its own servers, actors and learner. The
    start is a 1-minute average: above 1 on this 2-core machine, something ran in the
    minute before (in `make bench`, the step before this one) and may still be running."""
    end = f"{m.get('loadavg_end', 0):.1f} at the end, the run's own processes included"
    if m.get("loadavg_start") is None:
        return f"load average {end}"
    busy = (" (a 1-minute average: it counts the minute before the run, in `make bench` "
            "the step before this one)") if m["loadavg_start"] > 1.0 else ""
    return f"load average {m['loadavg_start']:.1f} at the start{busy} and {end}"


def peers_section(doc: dict[str, Any], prev: dict[str, Any] | None = None) -> str:
    """bench/peers.py: inreplay against Reverb, TorchRL, cpprb and Redis + a learner-side
    tree, the Ape-X loop at three item sizes, with its goals; with the same-host
    path, cpprb's single learner and echo's stream in the run, the shm goals too
    (prev: the previous run's rows, for its TCP and DPDK figures)."""
    rows = _apex_rows(doc["rows"])
    cfg = doc["config"]
    mc = doc["memcpy_gbps"]
    quick = " (a --quick run)" if doc.get("quick") else ""
    inflight = next((r["prefetch"] for r in rows if r.get("prefetch")), 1)
    m = doc.get("machine", {})
    out = [f"Measured by `bench/peers.py`{quick} at commit {doc.get('commit', '?')} on "
           f"{m.get('cpu', cpu_model())}, {m.get('cpus', '?')} cores, Python "
           f"{m.get('python', '?')}; {_peers_load(m)}. {cfg['actors']} actor "
           f"connections insert batches of {cfg['batch']} while one learner samples "
           f"{cfg['sample']} and updates "
           f"{cfg['sample']} priorities, {cfg['seconds']:.0f} s per cell after filling the "
           f"table; servers on core {doc['pinning'].get('server')}, actors and learner on core "
           f"{doc['pinning'].get('client')}. memcpy on this run: {mc:.1f} GB/s. Server CPU per "
           f"item: the server's CPU time over the items inserted and sampled (kernel-poll and "
           f"DPDK spin, so theirs includes idle polling); sample p50 / p99: what the learner "
           f"waits for a batch (Reverb's TrajectoryDataset keeps 1,024 samples in flight, "
           f"inreplay's learner {inflight} requests, as the Ape-X learner's prefetcher "
           f"does; their round trips in parentheses); sample / memcpy: the 28 KB sample's "
           f"round trip p50 over one memcpy of its 14.5 MB.", "",
           "| system | item | learner batches/s | sample p50 / p99 | inserts/s | "
           "server CPU per item | sample / memcpy | path |",
           "|---|---|---|---|---|---|---|---|"]

    def f(x: Any, fmt: str = "{:,.0f}") -> str:
        return "—" if x is None else fmt.format(x)

    for r in sorted(rows, key=lambda r: (r["item_bytes"], -r["batches_per_s"])):
        vs_copy = r.get("sample_vs_memcpy") if r["item_bytes"] == 28224 else None
        lat = (f"{f(r['sample_p50_us'])} / {f(r['sample_p99_us'])} µs"
               if r["sample_p50_us"] is not None else "—")
        if r.get("sample_rtt_p50_us") is not None:  # a prefetching learner's round trips
            lat += f" (round trip {f(r['sample_rtt_p50_us'])} µs, {r.get('prefetch')} in flight)"
        out.append(f"| {r['system']} | {human(r['item_bytes'])} | "
                   f"{r['batches_per_s']:,.1f} | {lat} | {r['inserts_per_s']:,.0f} | "
                   f"{f(r.get('server_cpu_us_per_item'), '{:.2f} µs')} | "
                   f"{f(vs_copy, '{:.1f}x')} | {r['path']} |")
    for k, v in sorted(doc.get("errors", {}).items()):
        out.append(f"\nNot measured — {k}: {v.splitlines()[0][:300]}")
    cl = doc.get("client") or {}
    if cl:
        how = (f"interleaved in one run, in blocks of {cl['block_s']:g} s per path, each "
               f"timed in its steady state as a caller repeating it sees it"
               if cl.get("block_s") else "interleaved in one run")
        out += ["", f"The client's own path (ReplayClient against {cl.get('system')} on "
                    f"{cl.get('path')}, {how}): add of 50 × 28 KB "
                    f"{cl.get('add_50x28KB_MBps', 0):,.0f} MB/s (the same request through "
                    f"redis-py's execute_command, the path add took before: "
                    f"{cl.get('add_50x28KB_redispy_MBps', 0):,.0f} MB/s); sample(out=) of "
                    f"512 × 28 KB {cl.get('sample_512x28KB_out_MBps', 0):,.0f} MB/s."]
        per = cl.get("per_client_cpu_s") or {}
        if per:
            out[-1] += (f" Per second of the client's own CPU (system calls included): add "
                        f"{per.get('add_50x28KB_MBps', 0):,.0f} MB (redis-py's path "
                        f"{per.get('add_50x28KB_redispy_MBps', 0):,.0f} MB), sample(out=) "
                        f"{per.get('sample_512x28KB_out_MBps', 0):,.0f} MB.")
    out += ["", "Goals:"]
    for key, what, fmt in (("batches_per_s", "learner batches/s", "{:,.1f}"),
                           ("inserts_per_s", "inserts/s", "{:,.0f}")):
        for size, batch_goal in PEER_GOALS:
            want = batch_goal if key == "batches_per_s" else PEER_INSERT_GOAL
            me, rv = _best_inreplay(rows, size, key), _peer_row(rows, "reverb", size)
            if not me or not rv:
                out.append(f"- **NOT MEASURED** — {what} at {human(size)} ≥ {want:g}x Reverb's "
                           f"({'inreplay' if not me else 'Reverb'} has no row)")
                continue
            x = me[key] / max(rv[key], 1e-9)
            out.append(f"- **{_verdict(x >= want)}** — {what} at {human(size)}: "
                       f"{me['system']} {fmt.format(me[key])} = {x:.1f}x Reverb's "
                       f"{fmt.format(rv[key])} (goal ≥ {want:g}x)"
                       + ("" if x >= want else _split(me, rows)))
    mine = [r for r in rows if r["system"].startswith("inreplay") and r["item_bytes"] == 28224
            and r.get("sample_vs_memcpy") is not None and r["system"] not in PEER_SHM]
    if mine:
        best = min(mine, key=lambda r: r["sample_vs_memcpy"])
        x = best["sample_vs_memcpy"]
        copy_us = 512 * 28224 / (mc * 1e9) * 1e6
        why = ""
        if x > PEER_MEMCPY_GOAL:
            plain = _peer_row(rows, "inreplay-kernel", 28224) or best
            srv = (plain.get("server_cpu_us_per_item") or 0) * 512
            per_cpu = ((doc.get("client") or {}).get("per_client_cpu_s") or {}).get(
                "sample_512x28KB_out_MBps")
            mine = (f"; the client's own CPU for it is {512 * 28224 / per_cpu:,.0f} µs "
                    f"({512 * 28224 / per_cpu / copy_us:.1f}x the copy: recv_into the array, "
                    f"the client's loopback measure above)" if per_cpu else "")
            idle = cl.get("sample_512x28KB_out_MBps")
            if idle:  # the control: the same sample with no actors sharing the machine
                mine += (f"; with no actors running, the same sample on loopback takes "
                         f"{512 * 28224 / idle:,.0f} µs ({512 * 28224 / idle / copy_us:.1f}x "
                         f"the copy)")
            why = (f"; one copy of the 14.5 MB takes {copy_us:,.0f} µs here{mine}, and the "
                   f"server spends about {srv:,.0f} µs of CPU per 512 items moved "
                   f"(inreplay-kernel); the rest of the p50 is the bytes' other copies on the "
                   f"TCP path (the reply into socket buffers, across the veth) and the learner "
                   f"waiting for its core, shared with the actors on a loaded machine")
        out.append(f"- **{_verdict(x <= PEER_MEMCPY_GOAL)}** — the 28 KB sample of 512 "
                   f"({best['system']}, round trip p50 "
                   f"{best.get('sample_rtt_p50_us') or best['sample_p50_us']:,.0f} µs) is "
                   f"{x:.1f}x the "
                   f"time of one memcpy of its bytes at {mc:.1f} GB/s (goal ≤ "
                   f"{PEER_MEMCPY_GOAL:g}x){why}")
        others = [r for r in rows if r["item_bytes"] == 28224 and r.get("sample_vs_memcpy")
                  and not r["system"].startswith("inreplay")]
        if others:
            out.append("  The peers at 28 KB: " + ", ".join(
                f"{r['system']} {r['sample_vs_memcpy']:.1f}x" for r in others) + ".")
    else:
        out.append(f"- **NOT MEASURED** — the 28 KB sample within {PEER_MEMCPY_GOAL:g}x memcpy")
    same_host = _peers_same_host(doc, prev)
    if cl.get("add_50x28KB_MBps") is not None:
        v = cl["add_50x28KB_MBps"]
        per_add = (cl.get("per_client_cpu_s") or {}).get("add_50x28KB_MBps")
        why = ""
        if v < PEER_CLIENT_ADD_GOAL_MBPS and per_add:
            why = (f"; the client's own CPU allows {per_add:,.0f} MB/s (MB per CPU second, "
                   f"system calls included), so the rest of each call is waiting: the "
                   f"single-threaded server taking 1.4 MB in and the machine's other work")
        out.append(f"- **{_verdict(v >= PEER_CLIENT_ADD_GOAL_MBPS)}** — ReplayClient.add of "
                   f"50 × 28 KB: {v:,.0f} MB/s (goal ≥ {PEER_CLIENT_ADD_GOAL_MBPS:,.0f} MB/s)"
                   + why)
    if same_host:
        out += ["", *same_host]
    return "\n".join(out)


def _f(x: Any, fmt: str = "{:,.0f}") -> str:
    return "—" if x is None else fmt.format(x)


def _queue_cause(me: dict[str, Any], echo: dict[str, Any],
                 tcp: dict[str, Any] | None = None) -> str:
    """Where the stream's time went, from the CPU measured in the cell (tcp: the same
    cell on kernel TCP)."""
    share, per = me.get("server_cpu_share"), me.get("server_cpu_us_per_item")
    if share is None or per is None:
        return ""
    tper = (tcp or {}).get("server_cpu_us_per_item")
    polls = (f"; the shm server spent {per / tper:.1f}x the CPU per item of the same "
             f"server on kernel TCP ({tper:.2f} µs): with shm clients its loop polls while "
             f"under load instead of sleeping, CPU the producers and the learner need on "
             f"the same 2 cores" if tper and me["system"] in PEER_SHM and per > 1.5 * tper
             else "")
    limit = ("the server's core was the limit" if share > 0.8 else
             "the server had time to spare, so the limit was the clients' side: the "
             "producers' add of 50 items and the learner's sample, Python processes sharing "
             "the 2 cores with the server")
    esh = echo.get("server_cpu_share")
    eline = (f"; echo's learner process (its server, its drainer threads and the learner) "
             f"used {esh:.0%} of a core ({echo.get('server_cpu_us_per_item') or 0:.2f} µs per "
             f"item)" if esh is not None else "")
    return (f"; {me['system']}'s server used {share:.0%} of a core ({per:.2f} µs of CPU per "
            f"item), {limit}{polls}; its producers sent {me['sent_per_s']:,.0f} items/s{eline}")


def _cpprb_note(me: dict[str, Any], doc: dict[str, Any]) -> str:
    """What cpprb's figure does not pay that inreplay's does, and the machine's load."""
    load = (doc.get("machine") or {}).get("loadavg_end")
    cores = me.get("cores")
    return ("; cpprb's actors write into its shared-memory buffer with no server and no "
            "round trip, on every core" + (f" (inreplay here: {cores})" if cores else "")
            + (f"; load average {load:.1f} at the end on {doc['machine'].get('cpus', '?')} "
               f"cores, so every round trip also waits for a core" if load and load > 2.5
               else ""))


def _peers_same_host(doc: dict[str, Any], prev: dict[str, Any] | None) -> list[str]:
    """The single-learner and stream tables and the shm goals (empty for a run with
    neither the shm path nor the new peers)."""
    all_rows = doc["rows"]
    rows = _apex_rows(all_rows)
    single = [r for r in all_rows if r.get("workload") == "single"]
    queue = doc.get("queue_rows") or []
    if not (single or queue or any(r["system"] in PEER_SHM for r in rows)):
        return []
    mc = doc["memcpy_gbps"]
    cfg = doc["config"]
    out = [PEER_PATHS]
    if single:
        out += ["", "One learner in one process, no actors (cpprb's in-process "
                    "PrioritizedReplayBuffer against inreplay with the same loop): fill the "
                    "table in batches of 50, then insert batches of 50 for half the cell "
                    "(inserts/s) and sample 512 / update 512 for the other half (batches/s); "
                    "inreplay's server on its own core, the learner on the other. CPU: the "
                    "learner's own CPU seconds per wall second while inserting / sampling, "
                    "and the server's; what neither accounts for is waiting (for the other "
                    "side, or for a core on a loaded machine).", "",
                "| system | item | batches/s | sample p50 / p99 | inserts/s | "
                "CPU inserting | CPU sampling | path |",
                "|---|---|---|---|---|---|---|---|"]

        def share(r: dict[str, Any], phase: str) -> str:
            c = r.get("cpu_share") or {}
            if f"learner_cpu_{phase}" not in c:
                return "—"
            srv = c.get(f"server_cpu_{phase}")
            return (f"learner {c[f'learner_cpu_{phase}']:.0%}"
                    + ("" if srv is None else f", server {srv:.0%}"))

        for r in sorted(single, key=lambda r: (r["item_bytes"], -r["batches_per_s"])):
            out.append(f"| {r['system']} | {human(r['item_bytes'])} | "
                       f"{r['batches_per_s']:,.1f} | {_f(r['sample_p50_us'])} / "
                       f"{_f(r['sample_p99_us'])} µs | {r['inserts_per_s']:,.0f} | "
                       f"{share(r, 'insert')} | {share(r, 'sample')} | {r['path']} |")
    if queue:
        out += ["", f"The stream (IMPALA/SEED's pattern): producer processes send items as "
                    f"fast as they are taken, one learner takes batches of 512 in FIFO order. "
                    f"echo 0.2.1: its Server (TcpTransport) in the learner's process, "
                    f"TcpClient.send of one sample at a time (it pipelines 32), the batch a "
                    f"zero-copy view valid until the next; inreplay: a REPLAY.CREATE ... QUEUE "
                    f"{cfg.get('queue_items', 2048)} table, ReplayClient.add of 50 items, "
                    f"sample(out=) of 512 into one array reused each time. Every process, "
                    f"inreplay's server included, may run on both cores. CPU per item: "
                    f"inreplay's server process, or echo's learner process (its server lives "
                    f"there).", "",
                "| system | item | producers | learner items/s | sent items/s | "
                "CPU per item | path |", "|---|---|---|---|---|---|---|"]
        for r in sorted(queue, key=lambda r: (r["item_bytes"], r["producers"],
                                              -r["items_per_s"])):
            out.append(f"| {r['system']} | {human(r['item_bytes'])} | {r['producers']} | "
                       f"{r['items_per_s']:,.0f} | {r['sent_per_s']:,.0f} | "
                       f"{_f(r.get('server_cpu_us_per_item'), '{:.2f} µs')} | {r['path']} |")
    cs = doc.get("client_shm") or {}
    if cs:
        out += ["", f"The client's own path on the shm rings (as above, against "
                    f"{cs.get('system')}): add of 50 × 28 KB {cs.get('add_50x28KB_MBps', 0):,.0f}"
                    f" MB/s; sample(out=) of 512 × 28 KB "
                    f"{cs.get('sample_512x28KB_out_MBps', 0):,.0f} MB/s."]
    out += ["", "Goals of the same-host path and the streams:"]
    for key, what in (("batches_per_s", "learner batches/s"), ("inserts_per_s", "inserts/s")):
        for size in (128, 640, 28224):
            me = _best_inreplay(rows, size, key, shm=True)
            cp = _peer_row(rows, "cpprb", size)
            if not me or not cp:
                out.append(f"- **NOT MEASURED** — {what} at {human(size)} on the same-host "
                           f"path ≥ cpprb's ({'inreplay-shm' if not me else 'cpprb'} has no "
                           f"row)")
                continue
            x = me[key] / max(cp[key], 1e-9)
            fmt = "{:,.1f}" if key == "batches_per_s" else "{:,.0f}"
            out.append(f"- **{_verdict(x >= 1.0)}** — {what} at {human(size)} in the Ape-X "
                       f"loop: {me['system']} {fmt.format(me[key])} = {x:.2f}x cpprb's "
                       f"{fmt.format(cp[key])} (goal ≥ 1x)"
                       + ("" if x >= 1.0 else _split(me, rows) + _cpprb_note(me, doc)))
    for size in (128, 28224):
        for n in doc["config"].get("producers") or (1, 4):
            mine = [r for r in queue if r["system"] in PEER_SHM and r["item_bytes"] == size
                    and r["producers"] == n]
            me = max(mine, key=lambda r: r["items_per_s"]) if mine else None
            ec = next((r for r in queue if r["system"] == "echo" and r["item_bytes"] == size
                       and r["producers"] == n), None)
            if not me or not ec:
                out.append(f"- **NOT MEASURED** — QUEUE items/s at {human(size)} with {n} "
                           f"producer(s) ≥ {PEER_QUEUE_GOAL:g}x echo's "
                           f"({'inreplay-shm' if not me else 'echo'} has no row)")
                continue
            x = me["items_per_s"] / max(ec["items_per_s"], 1e-9)
            tcp = next((r for r in queue if r["system"] == "inreplay-kernel"
                        and r["item_bytes"] == size and r["producers"] == n), None)
            tcp_s = (f"; on kernel TCP {tcp['items_per_s']:,.0f} = "
                     f"{tcp['items_per_s'] / max(ec['items_per_s'], 1e-9):.2f}x"
                     if tcp else "")
            ok = x >= PEER_QUEUE_GOAL
            out.append(f"- **{_verdict(ok)}** — QUEUE items/s at {human(size)}, {n} "
                       f"producer{'s' if n > 1 else ''}: {me['system']} "
                       f"{me['items_per_s']:,.0f} = {x:.2f}x echo's {ec['items_per_s']:,.0f} "
                       f"(goal ≥ {PEER_QUEUE_GOAL:g}x){tcp_s}"
                       + ("" if ok else _queue_cause(me, ec, tcp)))
    mine = [r for r in rows if r["system"] in PEER_SHM and r["item_bytes"] == 28224
            and r.get("sample_vs_memcpy") is not None]
    if mine:
        best = min(mine, key=lambda r: r["sample_vs_memcpy"])
        x = best["sample_vs_memcpy"]
        copy_us = 512 * 28224 / (mc * 1e9) * 1e6
        why = ""
        if x > PEER_MEMCPY_GOAL:
            idle = cs.get("sample_512x28KB_out_MBps")
            per_cpu = (cs.get("per_client_cpu_s") or {}).get("sample_512x28KB_out_MBps")
            why = f"; one copy of the 14.5 MB takes {copy_us:,.0f} µs here"
            if idle:
                why += (f"; with no actors running, the same sample on the rings takes "
                        f"{512 * 28224 / idle:,.0f} µs ({512 * 28224 / idle / copy_us:.1f}x the "
                        f"copy)")
            if per_cpu:
                why += (f", of which the client's own CPU is {512 * 28224 / per_cpu:,.0f} µs "
                        f"({512 * 28224 / per_cpu / copy_us:.1f}x: copying out of the reply "
                        f"ring into the array)")
            why += ("; the rest of the loaded round trip is the server writing the items "
                    "into the ring and the learner waiting for its core, shared with the "
                    "actors")
        out.append(f"- **{_verdict(x <= PEER_MEMCPY_GOAL)}** — the 28 KB sample of 512 on the "
                   f"same-host path ({best['system']}, round trip p50 "
                   f"{best.get('sample_rtt_p50_us') or best['sample_p50_us']:,.0f} µs) is "
                   f"{x:.1f}x one memcpy of its bytes at {mc:.1f} GB/s (goal ≤ "
                   f"{PEER_MEMCPY_GOAL:g}x){why}")
    else:
        out.append(f"- **NOT MEASURED** — the 28 KB sample on the same-host path within "
                   f"{PEER_MEMCPY_GOAL:g}x memcpy (no inreplay-shm row at 28 KB)")
    out += _peers_regression(doc, prev)
    return out


def _peers_regression(doc: dict[str, Any], prev: dict[str, Any] | None) -> list[str]:
    """The TCP and DPDK figures of this run against the previous run's (its JSON, or the
    table of the page's block)."""
    rows = _apex_rows(doc["rows"])
    mine = [s for s in PEER_NET if any(r["system"] == s for r in rows)]
    if not mine:
        return []
    if not prev or not prev.get("rows"):
        return [f"- **NOT MEASURED** — the TCP and DPDK figures ({', '.join(mine)}) not more "
                f"than {1 - PEER_REGRESSION:.0%} below the previous run's: no previous run is "
                f"kept (no --peers-prev JSON and no table in the page's block)"]
    old = _apex_rows(prev["rows"])
    src = prev.get("source", "the previous run")
    how = ""
    if bool(prev.get("quick")) != bool(doc.get("quick")):
        how = (f"; this run is {'a --quick' if doc.get('quick') else 'a full'} one and the "
               f"previous {'a --quick' if prev.get('quick') else 'a full'} one (shorter cells "
               f"and smaller tables), so the two are not like for like")
    pl, nl = prev.get("loadavg"), (doc.get("machine") or {}).get("loadavg_end")
    if pl is not None and nl is not None:
        how += f"; load average at the end {pl:.1f} then, {nl:.1f} now"
    out = []
    for s in mine:
        cells, worst, missing, paths = [], None, [], set()
        fell: list[str] = []  # the figures under the line (judged unrounded)
        for size in sorted({r["item_bytes"] for r in rows if r["system"] == s}):
            now, was = _peer_row(rows, s, size), _peer_row(old, s, size)
            if now is None or was is None:
                missing.append(human(size))
                continue
            if _bare_path(now.get("path")) != _bare_path(was.get("path")):
                paths.add(f"{was.get('path')} then, {now.get('path')} now")
            for key, name, fmt in (("batches_per_s", "batches/s", "{:,.1f}"),
                                   ("inserts_per_s", "inserts/s", "{:,.0f}")):
                x = now[key] / max(was[key], 1e-9)
                worst = x if worst is None else min(worst, x)
                if x < PEER_REGRESSION:
                    fell.append(f"{name} at {human(size)}")
                cells.append(f"{name} at {human(size)} {fmt.format(was[key])} → "
                             f"{fmt.format(now[key])} ({x:.2f}x)")
        if worst is None:
            out.append(f"- **NOT MEASURED** — {s}'s figures against {src}: it has no {s} row")
            continue
        ok = worst >= PEER_REGRESSION
        out.append(f"- **{_verdict(ok)}** — {s}'s figures not more than "
                   f"{1 - PEER_REGRESSION:.0%} below {src}'s: " + "; ".join(cells)
                   + (f" (no earlier row at {', '.join(missing)})" if missing else "")
                   + ("" if ok else f"; below: {', '.join(fell)}"
                      + how + "".join(f"; another path ({p})" for p in sorted(paths))))
    return out


def _bare_path(p: str | None) -> str:
    """A row's path without the label "kernel TCP, " that the shm runs add."""
    return (p or "").removeprefix("kernel TCP, ").removeprefix("DPDK + lwIP, ")


def peers_from_readme(text: str) -> dict[str, Any] | None:
    """The previous run's Ape-X rows from the docs' peers block (a clean clone keeps no
    JSON of it): system, item size, learner batches/s, inserts/s."""
    m = section_pattern("peers").search(text)
    if not m:
        return None
    body = m.group(2)
    sizes = {human(z): z for z in (128, 640, 28224)}
    rows: list[dict[str, Any]] = []
    seen = False
    for line in body.splitlines():
        if not line.startswith("|"):
            if seen:
                break  # the Ape-X table is the block's first; the others follow it
            continue
        seen = True
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 8 or cells[1] not in sizes:
            continue
        try:
            rows.append({"system": cells[0], "item_bytes": sizes[cells[1]],
                         "batches_per_s": float(cells[2].replace(",", "")),
                         "inserts_per_s": float(cells[4].replace(",", "")), "path": cells[-1]})
        except ValueError:
            continue  # the header
    commit = re.search(r"at commit (\S+)", body)
    load = re.search(r"and ([0-9.]+) at the end", body)
    return {"rows": rows, "quick": "(a --quick run)" in body,
            "source": f"the page's last run (commit {commit.group(1) if commit else '?'})",
            "loadavg": float(load.group(1)) if load else None} if rows else None


def peers_plot(doc: dict[str, Any], png: Path) -> Path | None:
    """Learner batches/s and inserts/s per system and item size (log scale)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = doc["rows"]
    sizes = sorted({r["item_bytes"] for r in rows})
    systems = list(dict.fromkeys(r["system"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / max(1, len(systems))
    for ax, key, title in ((axes[0], "batches_per_s", "learner batches of 512 per second"),
                           (axes[1], "inserts_per_s", "inserts per second")):
        for j, sys_ in enumerate(systems):
            vals = [(_peer_row(rows, sys_, z) or {}).get(key) or 0 for z in sizes]
            ax.bar([i + j * width for i in range(len(sizes))], vals, width, label=sys_)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(sizes))],
                      [human(z) for z in sizes])
        ax.set_yscale("log")
        ax.set_title(title)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"The Ape-X loop against the peers ({'quick run, ' if doc.get('quick') else ''}"
                 f"commit {doc.get('commit', '?')})")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=90)
    plt.close(fig)
    return png


FAULT_GOAL_RATIO = 1.5
FAULT_FRESH_MS = 300.0
FAULT_THROUGHPUT = 0.7


def _fault_row(doc: dict[str, Any], system: str, workload: str, cond: str) -> Row | None:
    return next((r for r in doc["results"] if r["system"] == system
                 and r["workload"] == workload and r["condition"] == cond), None)


def fault_goals(doc: dict[str, Any]) -> list[tuple[bool | None, str]]:
    """The fault goals from a bench/faults.py run: (passed, or None if not measured; text)."""
    conds = list(doc["conditions"])
    workloads = [w for w in dict.fromkeys(r["workload"] for r in doc["results"])
                 if w != "first reply"]
    goals: list[tuple[bool | None, str]] = []
    misses, pairs = [], 0
    for w in workloads:
        for c in conds:
            k, d = _fault_row(doc, "kernel", w, c), _fault_row(doc, "dpdk", w, c)
            if not (k and d):
                continue
            pairs += 1
            x = d["p99_ms"] / max(k["p99_ms"], 1e-9)
            if x > FAULT_GOAL_RATIO:
                misses.append(f"{w} under {c}: {d['p99_ms']:,.1f} vs {k['p99_ms']:,.1f} ms "
                              f"({x:.1f}×)")
    text = (f"DPDK p99 ≤ {FAULT_GOAL_RATIO}× the kernel stack's at every workload and "
            f"condition: {pairs - len(misses)} of {pairs} cells")
    goals.append((None if not pairs else not misses,
                  text + (f"; over: {'; '.join(misses)}" if misses else "")))
    f = _fault_row(doc, "dpdk", "first reply", "loss-5")
    kf = _fault_row(doc, "kernel", "first reply", "loss-5")
    goals.append((None if not f else f["p99_ms"] <= FAULT_FRESH_MS,
                  f"first reply on a fresh connection under 5% loss ≤ {FAULT_FRESH_MS:.0f} ms "
                  "p99 (DPDK): " + (f"{f['p99_ms']:,.1f} ms (n={f['n']}; kernel stack "
                                   f"{kf['p99_ms']:,.1f} ms)" if f and kf else
                                   f"{f['p99_ms']:,.1f} ms (n={f['n']})" if f else "not measured")))
    lossy, clean = (_fault_row(doc, "dpdk", "GET 13 MB", c) for c in ("loss-1", "none"))
    if lossy and clean:
        x = clean["mean_ms"] / lossy["mean_ms"]
        mbps = [(13 << 20) / (r["mean_ms"] / 1e3) / 1e6 for r in (lossy, clean)]
        goals.append((x >= FAULT_THROUGHPUT,
                      f"GET 13 MB throughput at 1% loss ≥ {FAULT_THROUGHPUT}× loss-free (DPDK): "
                      f"{mbps[0]:,.0f} vs {mbps[1]:,.0f} MB/s = {x:.2f}×"))
    else:
        goals.append((None, "GET 13 MB throughput at 1% loss: not measured"))
    return goals


def _build_patches(doc: dict[str, Any]) -> str:
    """'no lwIP patches' or 'lwIP patches 0001+0002' from a run's stack_build."""
    m = re.search(r"patches ([0-9+]+|none)", _build(doc.get("dpdk_build")))
    return "no lwIP patches" if not m or m.group(1) == "none" else f"lwIP patches {m.group(1)}"


def _build(b: object) -> str:
    """INFO's stack_build as redis-py parsed it (a value with commas comes as a list)."""
    return ", ".join(map(str, b)) if isinstance(b, list) else str(b or "?")


def faults_section(doc: dict[str, Any], before: dict[str, Any] | None = None) -> str:
    """The fault table; with `before` (a run of the same code built with
    -Dlwip_skip_patches=...) a column of its DPDK numbers for comparison."""
    systems = [s for s in doc["systems"] if any(r["system"] == s for r in doc["results"])]
    run = "a quick run (`bench/faults.py --quick`)" if doc.get("quick") else "`bench/faults.py`"
    out = [f"Generated by `bench/report.py --faults` from {run} of the committed code on a "
           f"shared {doc.get('cpus', '?')}-core machine ({doc.get('when', '?')}; other engineers' "
           f"builds and tests ran at the same time, so single cells are noisy). MTU "
           f"{doc.get('mtu', '?')}, one request in flight, the bridge's spec in both "
           f"directions. DPDK build: {_build(doc.get('dpdk_build'))}.", "",
           "p50 / p99 / max in ms (n requests per cell):", "",
           "| workload | condition | " + " | ".join(systems) +
           (" | dpdk p99 ÷ kernel p99 |" if {"kernel", "dpdk"} <= set(systems) else " |") +
           (f" dpdk, {_build_patches(before)} |" if before else ""),
           "|---|---|" + "---|" * len(systems) +
           ("---|" if {"kernel", "dpdk"} <= set(systems) else "") + ("---|" if before else "")]
    workloads = list(dict.fromkeys(r["workload"] for r in doc["results"]))
    for w in workloads:
        for c, spec in doc["conditions"].items():
            cells = []
            for s in systems:
                r = _fault_row(doc, s, w, c)
                cells.append(f"{r['p50_ms']:,.2f} / {r['p99_ms']:,.1f} / {r['max_ms']:,.1f} "
                             f"({r['n']})" if r else "—")
            row = f"| {w} | {c}{f' (`{spec}`)' if spec else ''} | " + " | ".join(cells) + " |"
            if {"kernel", "dpdk"} <= set(systems):
                k, d = _fault_row(doc, "kernel", w, c), _fault_row(doc, "dpdk", w, c)
                row += (f" {d['p99_ms'] / max(k['p99_ms'], 1e-9):.2f}× |" if k and d else " — |")
            if before:
                b = _fault_row(before, "dpdk", w, c)
                row += (f" {b['p50_ms']:,.2f} / {b['p99_ms']:,.1f} / {b['max_ms']:,.1f} "
                        f"({b['n']}) |" if b else " — |")
            out.append(row)
    out += ["", "Goals:", ""]
    for ok, text in fault_goals(doc):
        verdict = "NOT MEASURED" if ok is None else "PASS" if ok else "NOT MET"
        out.append(f"- **{verdict}** — {text}")
    if doc.get("errors"):
        out += ["", "Errors: " + "; ".join(doc["errors"])]
    return "\n".join(out)


INTEGRATION_RUNS: dict[str, tuple[str, dict[str, str]]] = {
    # integration (and Reverb's way of sampling): its label and each buffer's
    "torchrl": ("TorchRL DQN (`inreplay.integrations.torchrl_dqn`)",
                {"local": "LazyTensorStorage + PrioritizedSampler",
                 "inreplay": "InreplayStorage + InreplaySampler"}),
    "rllib": ("RLlib DQN (`inreplay.integrations.rllib_dqn`)",
              {"local": "PrioritizedEpisodeReplayBuffer",
               "inreplay": "InreplayEpisodeReplayBuffer"}),
    "sb3": ("SB3 DQN (`inreplay.integrations.sb3`)",
            {"local": "SB3's ReplayBuffer",
             "inreplay": "ApplianceReplayBuffer (uniform)",
             "inreplay-prioritized": "PrioritizedDQN + ApplianceReplayBuffer(prioritized=True)"}),
    "jax": ("JAX DQN (`inreplay.integrations.jax_dqn`)",
            {"local": "RingBuffer (NumPy, in process)",
             "inreplay": "ApplianceBuffer (`sample(..., jax=True)`)"}),
    "reverb/sample": ("Reverb API, `Client.sample` (`bench/reverb_api.py`)",
                      {"local": "dm-reverb 0.14 (server in process)",
                       "inreplay": "`reverb_compat` (appliance)"}),
    "reverb/dataset": ("Reverb API, `TrajectoryDataset` (`bench/reverb_api.py`)",
                       {"local": "dm-reverb 0.14 (server in process)",
                        "inreplay": "`reverb_compat` (appliance)"}),
}
"""bench/integrations.py's integrations in the block's order."""


def _integration(r: Row) -> str:
    """A run row's key in INTEGRATION_RUNS (RLlib's rows say bench, not integration)."""
    name = str(r.get("integration") or r.get("bench"))
    return f"{name}/{r['way']}" if "way" in r else name


def integrations_section(doc: dict[str, Any] | list[Row]) -> str:
    """Each integration's learner steps/s with its library's own local buffer and with
    inreplay, from one run of bench/integrations.py (make bench)."""
    if isinstance(doc, list):  # rows only (before the run's metadata was written)
        doc = {"rows": doc}
    rows, m = doc["rows"], doc.get("machine") or {}
    runs = [r for r in rows if not r.get("summary") and not r.get("buffer_only")
            and "error" not in r]
    ran = [n for n in INTEGRATION_RUNS if any(_integration(r) == n for r in runs)]
    flags = " ".join(dict.fromkeys(f"--{n.split('/')[0]}" for n in ran)) or "(none)"
    out = [f"Generated by `bench/report.py --integrations` from one run of "
           f"`bench/integrations.py {flags} --rounds {doc.get('rounds', '?')} "
           f"--steps {doc.get('steps', '?')}` (as `make bench` runs it) at commit "
           f"{doc.get('commit', '?')} ({doc.get('when', '?')}, {doc.get('seconds', 0):,.0f} s; "
           f"{m.get('cpus', '?')} cores, load average {m.get('loadavg_start', 0):.1f} at the "
           f"start and {m.get('loadavg_end', 0):.1f} at the end). In each integration the "
           "local and inreplay runs alternate with the same seed and step count and no early "
           "stop; the server runs on the kernel stack on the same box, a process of its own.",
           "", "| integration | buffer | learner steps/s per round | median | inreplay ÷ local |",
           "|---|---|---|---|---|"]
    missing = []
    for name, (label, buffers) in INTEGRATION_RUNS.items():
        mine = [r for r in runs if _integration(r) == name]
        med: dict[str, float] = {}
        for buf, what in buffers.items():
            v = [r["learner_steps_per_s"] for r in sorted(
                (r for r in mine if r["buffer"] == buf),
                key=lambda r: r.get("round", r.get("repeat", 0)))]
            if not v:
                missing.append(f"{label}: {what}")
                continue
            med[buf] = statistics.median(v)
            ratio = (f"{med[buf] / med['local']:.2f}×"
                     if buf != "local" and med.get("local") else "")
            out.append(f"| {label} | {what} | " + " / ".join(f"{x:,.1f}" for x in v) +
                       f" | {med[buf]:,.1f} | {ratio} |")
        if not mine:
            out.append(f"| {label} | — | not run | | |")
    out += ["", f"- **{_verdict(not missing)}** — every integration's learner steps/s "
            "against its library's own local buffer in one run"
            + (f" (no rows: {'; '.join(missing)})" if missing else "")]
    out += [f"- {r['integration']} failed: {r['error']}" for r in rows if "error" in r]
    rv = [r for r in runs if r.get("integration") == "reverb" and r.get("way") == "sample"]
    if rv:
        ins = {b: statistics.median(r["inserts_per_s"] for r in rv if r["buffer"] == b)
               for b in ("local", "inreplay") if any(r["buffer"] == b for r in rv)}
        out += ["", "The Reverb loop's writes (one `TrajectoryWriter`, a one-step item per "
                "step, `flush` every 64), median items/s: " + ", ".join(
                    f"{INTEGRATION_RUNS['reverb/sample'][1][b]} {v:,.0f}"
                    for b, v in ins.items()) + "."]
    only = [r for r in rows if r.get("buffer_only")]
    if only:
        out += ["", "TorchRL's buffer alone (sample(64) + `update_tensordict_priority` on "
                "10,240 CartPole transitions, median of the repeats; the client's CPU only, "
                "the server's is in its own process):", "",
                "| buffer | steps/s | wall µs/step | client CPU µs/step |", "|---|---|---|---|"]
        for r in only:
            out.append(f"| {r['buffer']} | {r['steps_per_s']:,.0f} | "
                       f"{r['wall_us_per_step']:,.0f} | {r['client_cpu_us_per_step']:,.0f} |")
    rl = [r for r in rows if r.get("bench") == "rllib" and not r.get("summary")]
    if rl:
        keys = sorted({k for r in rl for k in r.get("replay_seconds", {})})
        parts = []
        for buf in ("local", "inreplay"):
            mine = [r["replay_seconds"] for r in rl if r["buffer"] == buf]
            if mine:
                parts.append(f"{buf}: " + ", ".join(
                    f"{k} {statistics.median(x.get(k, 0) for x in mine):.4f}" for k in keys))
        out += ["", "RLlib's own timers per call, medians over the runs (seconds): "
                + "; ".join(parts) + "."]
    return "\n".join(out)


def section_pattern(name: str) -> re.Pattern[str]:
    """A generated docs block: groups (BEGIN marker line, body, END marker)."""
    n = re.escape(name)
    return re.compile(rf"(<!-- BEGIN {n}\b[^>]*-->\n)(.*?)(<!-- END {n} -->)", re.S)


def replace_section(text: str, name: str, body: str) -> str:
    pat = section_pattern(name)
    if not pat.search(text):
        raise SystemExit(f"no '{name}' section markers")
    return pat.sub(lambda m: m.group(1) + body.rstrip() + "\n" + m.group(3), text)


class Pages:
    """The markdown files that hold generated blocks: each block is in exactly one."""

    def __init__(self, paths: list[Path]) -> None:
        self.texts = {p: p.read_text() for p in paths}

    def holder(self, name: str) -> Path:
        pat = section_pattern(name)
        found = [p for p, text in self.texts.items() if pat.search(text)]
        if len(found) != 1:
            where = ", ".join(map(str, found)) or "none of " + ", ".join(map(str, self.texts))
            raise SystemExit(f"the '{name}' section markers must be in one page: {where}")
        return found[0]

    def text_with(self, name: str) -> str:
        return self.texts[self.holder(name)]

    def replace(self, name: str, body: str) -> None:
        path = self.holder(name)
        self.texts[path] = replace_section(self.texts[path], name, body)

    def write(self) -> list[Path]:
        changed = [p for p, text in self.texts.items() if p.read_text() != text]
        for p in changed:
            p.write_text(self.texts[p])
        return changed


ONE_FILE_BLOCKS: dict[str, tuple[str, Callable[[Any], str]]] = {
    # main()'s option (its JSON file) -> the block it writes, and how
    "throughput": ("throughput", throughput_section),
    "module_host": ("module-host", module_host_section),
    "soak": ("soak", soak_section),
    "compress": ("compress", compress_section),
    "redis_suite": ("redis-suite", redis_suite_section),
    "server_time": ("server-sample", server_sample_section),
    "limiter": ("limiter", limiter_section),
    "params": ("params", params_section),
    "integrations": ("integrations", integrations_section),
}
"""The blocks that come from one option's JSON file alone."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sumtree", metavar="JSON", help="output of bench/sumtree.py --json")
    ap.add_argument("--latency", metavar="JSON", help="output of bench/latency.py --json")
    ap.add_argument("--latency-prev", metavar="JSON",
                    help="the previous run's --latency JSON: its server times go beside this "
                    "run's (without it, the ones the docs' server-time block shows)")
    ap.add_argument("--throughput", metavar="JSON",
                    help="output of bench/throughput.py --json")
    ap.add_argument("--demo", metavar="JSON",
                    help="summary.json of make demo (CartPole; --stack dpdk in make bench)")
    ap.add_argument("--demo-kernel", metavar="JSON",
                    help="summary.json of the same CartPole demo with --stack kernel")
    ap.add_argument("--breakout", metavar="JSON", help="summary.json of a Breakout demo run")
    ap.add_argument("--soak", metavar="JSON", help="output of bench/soak.py --json")
    ap.add_argument("--breakdown", metavar="JSON", help="output of bench/breakdown.py --json")
    ap.add_argument("--nics", metavar="JSON",
                    help="bench/latency.py --dpdk-pmd af_xdp --json (with --latency)")
    ap.add_argument("--swarm", metavar="JSON", action="append",
                    help="output of bench/swarm.py --json (repeatable: the rows are joined)")
    ap.add_argument("--compress", metavar="JSON", help="output of bench/compress.py --json")
    ap.add_argument("--limiter", metavar="JSON", help="output of bench/limiter.py --json")
    ap.add_argument("--server-time", metavar="JSON", help="output of bench/server_time.py --json")
    ap.add_argument("--params", metavar="JSON", help="output of bench/params.py --json")
    ap.add_argument("--module-host", metavar="JSON",
                    help="output of bench/latency.py --systems kernel,redis-module --json")
    ap.add_argument("--redis-suite", metavar="JSON",
                    help="output of tests/redis_suite/run.py --json (make redis-suite)")
    ap.add_argument("--peers", metavar="JSON", help="output of bench/peers.py --json")
    ap.add_argument("--peers-prev", metavar="JSON",
                    help="the previous bench/peers.py --json (default: the docs' block): "
                         "its TCP and DPDK figures are the ones this run's must keep")
    ap.add_argument("--faults", metavar="JSON", help="output of bench/faults.py --json")
    ap.add_argument("--faults-before", metavar="JSON",
                    help="bench/faults.py --json of the DPDK stack without some lwIP patches "
                         "(-Dlwip_skip_patches): a column of its DPDK numbers")
    ap.add_argument("--integrations", metavar="JSON",
                    help="output of bench/integrations.py --json (TorchRL, RLlib, SB3, JAX, "
                         "Reverb's API)")
    ap.add_argument("--readme", action="append", metavar="MD",
                    help="a markdown file holding generated blocks (repeatable; default: "
                         "every page under docs/)")
    ap.add_argument("--docs", default=str(ROOT / "docs"),
                    help="where the CartPole returns plot is copied (default docs/)")
    args = ap.parse_args(argv)
    pages = Pages([Path(p) for p in args.readme] if args.readme
                  else sorted((ROOT / "docs").rglob("*.md")))

    def load(path: str | None) -> dict[str, Any] | None:
        return json.loads(Path(path).read_text()) if path else None

    if args.sumtree:
        doc = json.loads(Path(args.sumtree).read_text())
        pages.replace("sumtree-k", sumtree_k_section(doc))
        pages.replace("sumtree-compare", sumtree_compare_section(doc))
    lat, thr, bd = load(args.latency), load(args.throughput), load(args.breakdown)
    demo, demo_kernel = load(args.demo), load(args.demo_kernel)
    if lat:
        pages.replace("latency", latency_section(lat))
        pages.replace("sampling", sampling_section(lat))
        kept = args.latency_prev and Path(args.latency_prev).exists()
        # a clean clone keeps no JSON of the last run: the page's block is its report
        prev = (load(args.latency_prev) if kept
                else server_times_from_readme(pages.text_with("server-time")))
        pages.replace("server-time", server_time_section(lat, prev))
    if lat or thr:
        dpdk_demo = demo if demo_kernel else None  # the demo goal compares the two runs
        pages.replace("bench-goals",
                               goals_section(lat, thr, bd, demo_kernel, dpdk_demo))
    if demo:
        brk = load(args.breakout)
        pages.replace("apex-demo", demo_section(demo, brk, demo_kernel))
        png = Path(args.demo).parent / "returns.png"
        docs = Path(args.docs)
        docs.mkdir(exist_ok=True)
        (docs / "cartpole-returns.png").write_bytes(png.read_bytes())
    if bd:
        pages.replace("breakdown", breakdown_section(bd))
    nics = load(args.nics)
    if lat and nics:
        pages.replace("nics", nics_section(lat, nics))
    swarm = None
    for path in args.swarm or []:
        doc = json.loads(Path(path).read_text())
        if swarm is None:
            swarm = doc
        else:
            swarm["rows"] += doc["rows"]
    if swarm:
        pages.replace("swarm", swarm_section(swarm))
    for arg, (block, section) in ONE_FILE_BLOCKS.items():
        given = thr if arg == "throughput" else load(getattr(args, arg))
        if given:
            pages.replace(block, section(given))
    peers = load(args.peers)
    if peers:
        kept = args.peers_prev and Path(args.peers_prev).exists()
        prev = (load(args.peers_prev) if kept
                else peers_from_readme(pages.text_with("peers")))
        if kept and prev is not None:
            prev.setdefault("source", f"the previous run (commit {prev.get('commit', '?')})")
            prev.setdefault("loadavg", (prev.get("machine") or {}).get("loadavg_end"))
        pages.replace("peers", peers_section(peers, prev))
        peers_plot(peers, Path(args.docs) / "peers.png")
    faults = load(args.faults)
    if faults:
        pages.replace("faults",
                               faults_section(faults, load(args.faults_before)))
    for path in pages.write():
        print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
