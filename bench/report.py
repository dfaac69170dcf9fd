"""Regenerate README.md's performance sections from benchmark JSON.

    python bench/report.py [--sumtree build/bench-sumtree.json] [--latency build/bench-latency.json]
                           [--throughput build/bench-throughput.json] [--readme README.md]

Each section sits between `<!-- BEGIN name ... -->` and `<!-- END name -->`
markers; everything between them is replaced, nothing else is touched.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
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

INNET = ("kernel", "dpdk")  # the inreplay systems; "redis" is stock Redis
Row = dict[str, Any]

# The goals of the benchmark issue (targets, not results).
GOAL_BATCH = 512
GOAL_SMALL_ITEM, GOAL_SMALL_RATIO = 128, 0.5  # REPLAY.SAMPLE <= 0.5x the baseline
GOAL_ATARI_ITEM = 84 * 84 * 4  # one 84x84x4 state: REPLAY.SAMPLE below the baseline
GOAL_GET_RATIO = 0.7  # DPDK GET 64 B p50 <= 0.7x stock Redis's


def human(size: int) -> str:
    """Sizes as bench/latency.py names them: 128 B, 28 KB, 13 MB."""
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
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


def context_lines(*docs: dict[str, Any]) -> list[str]:
    """Path, pinning, machine load, systems that did not run, the machine line."""
    doc = docs[0]
    net, pin = doc.get("network", {}), doc.get("pinning", {})
    if net.get("path") == "veth":
        path = ("Path: client in the root namespace, servers in a namespace behind a veth "
                "(stock Redis and kernel inreplay on its kernel address, DPDK on af_packet "
                "attached to the same veth)")
        if net.get("delay_us"):
            path += f", netem {net['delay_us']} µs on each end"
        if pin.get("server") is not None:
            path += f"; servers on core {pin['server']}, client on core {pin['client']}"
        path += "."
    else:
        path = "Path: loopback (not the veth)."
    loads = [m[k] for d in docs for m in [d["machine"]] for k in ("loadavg_start", "loadavg_end")
             if m.get(k) is not None]
    out = ["", path]
    if loads:
        out += ["", f"Load average during the runs: {min(loads):.1f} to {max(loads):.1f} on "
                    f"{doc['machine'].get('cpus', '?')} cores (other work shared them)."]
    missing = [f"- {system} ({d['bench']}): not measured: {err.splitlines()[0]}"
               for d in docs for system, err in d.get("errors", {}).items()]
    if missing:
        out += ["", *missing]
    return [*out, "", machine_line(doc)]


def by_workload(doc: dict[str, Any]) -> dict[tuple[str, str], Row]:
    return {(r["system"], r["workload"]): r for r in doc["latency"] + doc.get("local", [])}


def latency_section(doc: dict[str, Any]) -> str:
    rows = [r for r in doc["latency"] if r["kind"] in ("ping", "get", "set")]
    if not rows:
        return "*The latency benchmark produced no results.*"
    by = by_workload(doc)
    pipe = {(r["system"], r["workload"]): r for r in doc.get("pipelined", [])}
    conns = doc["config"].get("conns", 0)
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    systems = [s for s in doc["systems"] if any(r["system"] == s for r in rows)]
    out = ["One connection, one request in flight: µs as the client sees them (send, wait, "
           "parse). req/s and MB/s: one connection (1 / mean) and "
           f"{conns} connections pipelined. \"vs redis\" = p50 / stock Redis's p50.", "",
           "| request | system | p50 | p90 | p99 | mean | vs redis | req/s | MB/s "
           f"| {conns} conns req/s | {conns} conns MB/s |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for w in workloads:
        for s in systems:
            r = by.get((s, w))
            if r is None:
                continue
            p = pipe.get((s, w))
            rates = f"| {p['rps']:,.0f} | {p['mbps']:.1f} |" if p else "| — | — |"
            out.append(f"| {w} | {s} | {us(r['p50_us'])} | {us(r['p90_us'])} "
                       f"| {us(r['p99_us'])} | {us(r['mean_us'])} "
                       f"| {ratio(r['p50_us'], p50(by.get(('redis', w))))} "
                       f"| {r['rps']:,.0f} | {r['mbps']:.1f} {rates}")
    client = [f"{w} {us(c)} µs" for w in workloads if (c := doc["client_us"].get(w)) is not None]
    if client:
        out += ["", "The client's own cost per request (the same loop against a socketpair "
                "whose reply is already there; included above): " + ", ".join(client) + "."]
    out += ["", *[f"- {note}" for note in doc.get("notes", [])]]
    return "\n".join(out + context_lines(doc))


def sampling_section(doc: dict[str, Any]) -> str:
    by = by_workload(doc)
    rows = [r for r in doc["latency"] if r["kind"] in ("sample", "baseline")]
    if not rows:
        return "*The sampling benchmark produced no results.*"
    innet = [s for s in INNET if any(r["system"] == s and r["kind"] == "sample" for r in rows)]
    # "32 × 128 B", ... in (item size, batch) order
    shapes = list(dict.fromkeys(r["workload"].split(" ", 1)[1]
                                for r in sorted(rows, key=lambda r: (r["size"], r["batch"]))))
    out = ["In-network `REPLAY.SAMPLE` against the seed's learner-side baseline (the learner "
           "samples its own sum tree, then fetches the drawn items from stock Redis with one "
           "`MGET`), one connection, p50 µs (p99 in brackets), both timed end to end as the "
           "learner sees them. Ratios are in-network / baseline (below 1: in-network is "
           "faster). Tables: " + ", ".join(
               f"{n:,} items of {human(int(size))}"
               for size, n in doc["config"]["table_items"].items())
           + " (the in-network table and the baseline's keys and tree alike).", "",
           "| batch × item | baseline: local tree + MGET (redis) |"
           + "".join(f" REPLAY.SAMPLE ({s}) | {s} / baseline |" for s in innet),
           "|---|---|" + "---|---|" * len(innet)]
    for shape in shapes:
        base = by.get(("redis", f"BASELINE {shape}"))
        cells = [lat_cell(base)]
        for s in innet:
            r = by.get((s, f"SAMPLE {shape}"))
            cells += [lat_cell(r), ratio(p50(r), p50(base))]
        out.append(f"| {shape} | " + " | ".join(cells) + " |")

    n = doc["config"]["update_batch"]
    local = by.get(("learner", f"local update {n}"))
    cells = [f"{lat_cell(local)}, local tree, no network"]
    for s in innet:
        r = by.get((s, f"UPDATE {n}"))
        cells += [f"{lat_cell(r)}, `REPLAY.UPDATE`", ratio(p50(r), p50(local))]
    out.append(f"| update {n} | " + " | ".join(cells) + " |")
    for shape in shapes:
        if not shape.startswith(f"{n} "):
            continue
        base, up = p50(by.get(("redis", f"BASELINE {shape}"))), p50(local)
        base_step = base + up if base is not None and up is not None else None
        cells = [us(base_step) if base_step is not None else "—"]
        for s in innet:
            r, u = p50(by.get((s, f"SAMPLE {shape}"))), p50(by.get((s, f"UPDATE {n}")))
            step = r + u if r is not None and u is not None else None
            cells += [us(step) if step is not None else "—", ratio(step, base_step)]
        out.append(f"| step: sample {shape} + update {n} (sum of p50s) | "
                   + " | ".join(cells) + " |")

    served = [s for s in doc["systems"] if any(r["system"] == s and r["kind"] == "baseline"
                                               for r in rows)]
    out += ["", "The baseline's `MGET` served by each system (the local draw included), "
                "p50 µs (p99):", "",
            "| batch × item |" + "".join(f" {s} |" for s in served),
            "|---|" + "---|" * len(served)]
    for shape in shapes:
        out.append(f"| {shape} |" + "".join(f" {lat_cell(by.get((s, f'BASELINE {shape}')))} |"
                                           for s in served))

    pipe = {(r["system"], r["workload"]): r for r in doc.get("pipelined", [])}
    if any(r["kind"] in ("sample", "baseline") for r in doc.get("pipelined", [])):
        conns = doc["config"].get("conns", 0)
        limit = doc["config"]["pipeline_max_payload"] / (1 << 20)
        out += ["", f"{conns} connections pipelined, requests/s (MB/s of items); batches "
                    f"above {limit:g} MB are not run this way:", "",
                "| batch × item | baseline (redis) |"
                + "".join(f" REPLAY.SAMPLE ({s}) |" for s in innet),
                "|---|---|" + "---|" * len(innet)]
        for shape in shapes:
            got = [pipe.get(("redis", f"BASELINE {shape}"))]
            got += [pipe.get((s, f"SAMPLE {shape}")) for s in innet]
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
           "servers; 1 for the DPDK server, which busy-polls its core. \"per core vs redis\" "
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


VERDICT = {True: "**PASS**", False: "**NOT MET**", None: "**NOT MEASURED**"}


def goal_line(what: str, ok: bool | None, measured: str) -> str:
    return f"- {VERDICT[ok]} — {what}: {measured}"


def why_missing(doc: dict[str, Any] | None, *systems: str) -> str:
    if doc is None:
        return "no benchmark JSON given"
    for s in systems:
        if s in doc.get("errors", {}):
            return f"{s} not measured: {doc['errors'][s].splitlines()[0]}"
        if s not in doc.get("systems", []):
            return f"{s} not in this run"
    return "not in this run"


def goals_section(lat: dict[str, Any] | None, thr: dict[str, Any] | None) -> str:
    """Each goal of the benchmark issue with the measured numbers and PASS / NOT MET."""
    out = ["Goals, checked by `bench/report.py` against the numbers above (p50 for latency; "
           "NOT MET lines carry the measured value):", ""]
    rows = (lat or {}).get("latency", [])

    def find(system: str, kind: str, size: int, batch: int) -> Row | None:
        return next((r for r in rows if r["system"] == system and r["kind"] == kind
                     and r["size"] == size and r["batch"] == batch), None)

    for item, limit, strict in ((GOAL_SMALL_ITEM, GOAL_SMALL_RATIO, False),
                                (GOAL_ATARI_ITEM, 1.0, True)):
        base = find("redis", "baseline", item, GOAL_BATCH)
        for s in INNET:
            what = (f"`REPLAY.SAMPLE` {GOAL_BATCH} × {human(item)} ({s}) "
                    f"{'<' if strict else '≤'} {limit:g}× the learner-side baseline")
            r = find(s, "sample", item, GOAL_BATCH)
            if r and base:
                q = r["p50_us"] / base["p50_us"]
                out.append(goal_line(what, q < limit if strict else q <= limit,
                                     f"{us(r['p50_us'])} µs vs {us(base['p50_us'])} µs "
                                     f"= {q:.2f}×"))
            else:
                out.append(goal_line(what, None, why_missing(lat, "redis", s)))

    what = f"DPDK `GET 64 B` p50 ≤ {GOAL_GET_RATIO:g}× stock Redis's on the same path"
    d, b = find("dpdk", "get", 64, 1), find("redis", "get", 64, 1)
    if d and b:
        q = d["p50_us"] / b["p50_us"]
        out.append(goal_line(what, q <= GOAL_GET_RATIO,
                             f"{us(d['p50_us'])} µs vs {us(b['p50_us'])} µs = {q:.2f}×"))
    else:
        out.append(goal_line(what, None, why_missing(lat, "redis", "dpdk")))

    gets = [r for r in (thr or {}).get("runs", []) if r["test"] == "GET"]

    def run_of(system: str, label: str) -> Row | None:
        return next((r for r in gets if r["system"] == system and r["label"] == label), None)

    labels = list(dict.fromkeys(r["label"] for r in gets))
    small = [x for x in labels if next(r for r in gets if r["label"] == x)["size"] <= 64]
    for label in small or ["64 B"]:
        what = f"DPDK more `GET {label}` requests/s per server core than stock Redis"
        d, b = run_of("dpdk", label), run_of("redis", label)
        if d and b and d["rps_per_core"] and b["rps_per_core"]:
            q = d["rps_per_core"] / b["rps_per_core"]
            out.append(goal_line(what, q > 1, f"{d['rps_per_core']:,.0f} vs "
                                              f"{b['rps_per_core']:,.0f} = {q:.2f}×"))
        else:
            out.append(goal_line(what, None, why_missing(thr, "redis", "dpdk")))
    big = [x for x in labels if x not in small]
    for label in big or ["13 MB"]:
        for s in INNET:
            what = f"`GET {label}` MB/s ({s}) ≥ stock Redis's"
            r, b = run_of(s, label), run_of("redis", label)
            if r and b:
                q = r["mbps"] / b["mbps"]
                out.append(goal_line(what, q >= 1, f"{r['mbps']:,.1f} vs {b['mbps']:,.1f} MB/s "
                                                   f"= {q:.2f}×"))
            else:
                out.append(goal_line(what, None, why_missing(thr, "redis", s)))
    docs = [d for d in (lat, thr) if d]
    return "\n".join(out + (context_lines(*docs) if docs else []))


def demo_section(cartpole: dict[str, Any], breakout: dict[str, Any] | None) -> str:
    """The Ape-X results: make demo's CartPole run and a short Breakout run."""
    c = cartpole
    out = [f"`make demo` on this machine: **{c['env']}** on the **{c['stack']}** stack, "
           f"{c['num_actors']} actors, {'solved' if c['solved'] else 'NOT solved'}: greedy "
           f"evaluation mean {c['eval_return_mean']:.1f} over {c['eval_episodes']} episodes "
           f"(threshold {c.get('solve_return', 475):.0f}) after {c['wall_s']:.0f} s of wall time, "
           f"{c['env_frames']:,} environment frames and {c['learner_steps']:,} learner steps "
           f"(parameters v{c.get('eval_params_version', '?')}).", "",
           "![returns](docs/cartpole-returns.png)", "",
           "| run | stack | actors | actor frames/s | learner steps/s | samples/s | batch |",
           "|---|---|---|---|---|---|---|"]
    rows = [("CartPole-v1 (make demo)", c)] + ([("Breakout, 13 MB network", breakout)]
                                                if breakout else [])
    for name, s in rows:
        out.append(f"| {name} | {s['stack']} | {s['num_actors']} | "
                   f"{s['actor_frames_per_s']:,.0f} | {s['learner_steps_per_s']:.2f} | "
                   f"{s['samples_per_s']:,.0f} | {s['batch_size']} |")
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


def breakdown_section(b: dict[str, Any]) -> str:
    """bench/breakdown.py: one GET 64 B on the DPDK path, stage by stage."""
    out = [f"One `GET` of a 64 B value on the DPDK path, {b['requests']:,} requests on one "
           f"connection: round trip p50 {b['rtt_p50_us']:.1f} µs, mean {b['rtt_mean_us']:.1f} µs. "
           "The appliance's loop times its stages with the TSC (iterations that did work "
           f"only: {b['work_iterations_per_request']:.1f} per request); per request:", "",
           "| stage | µs | share of the mean round trip |", "|---|---|---|"]
    for name, v in b["stages_us"].items():
        out.append(f"| {name} | {v:.2f} | {v / b['rtt_mean_us'] * 100:.0f}% |")
    out.append(f"| **in the appliance's loop** | **{b['appliance_us']:.2f}** | "
               f"{b['appliance_us'] / b['rtt_mean_us'] * 100:.0f}% |")
    out.append(f"| outside it: client, kernel and veth, waiting for the next poll | "
               f"{b['outside_us']:.2f} | {b['outside_us'] / b['rtt_mean_us'] * 100:.0f}% |")
    return "\n".join(out)


def replace_section(text: str, name: str, body: str) -> str:
    n = re.escape(name)
    pat = re.compile(rf"(<!-- BEGIN {n}\b[^>]*-->\n)(.*?)(<!-- END {n} -->)", re.S)
    if not pat.search(text):
        raise SystemExit(f"README has no '{name}' section markers")
    return pat.sub(lambda m: m.group(1) + body.rstrip() + "\n" + m.group(3), text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sumtree", metavar="JSON", help="output of bench/sumtree.py --json")
    ap.add_argument("--latency", metavar="JSON", help="output of bench/latency.py --json")
    ap.add_argument("--throughput", metavar="JSON",
                    help="output of bench/throughput.py --json")
    ap.add_argument("--demo", metavar="JSON", help="summary.json of make demo (CartPole)")
    ap.add_argument("--breakout", metavar="JSON", help="summary.json of a Breakout demo run")
    ap.add_argument("--soak", metavar="JSON", help="output of bench/soak.py --json")
    ap.add_argument("--breakdown", metavar="JSON", help="output of bench/breakdown.py --json")
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    args = ap.parse_args(argv)
    readme = Path(args.readme)
    text = readme.read_text()
    if args.sumtree:
        doc = json.loads(Path(args.sumtree).read_text())
        text = replace_section(text, "sumtree-k", sumtree_k_section(doc))
        text = replace_section(text, "sumtree-compare", sumtree_compare_section(doc))
    lat = json.loads(Path(args.latency).read_text()) if args.latency else None
    thr = json.loads(Path(args.throughput).read_text()) if args.throughput else None
    if lat:
        text = replace_section(text, "latency", latency_section(lat))
        text = replace_section(text, "sampling", sampling_section(lat))
    if thr:
        text = replace_section(text, "throughput", throughput_section(thr))
    if lat or thr:
        text = replace_section(text, "bench-goals", goals_section(lat, thr))
    if args.demo:
        demo = json.loads(Path(args.demo).read_text())
        brk = json.loads(Path(args.breakout).read_text()) if args.breakout else None
        text = replace_section(text, "apex-demo", demo_section(demo, brk))
        png = Path(args.demo).parent / "returns.png"
        (ROOT / "docs").mkdir(exist_ok=True)
        (ROOT / "docs" / "cartpole-returns.png").write_bytes(png.read_bytes())
    if args.breakdown:
        text = replace_section(text, "breakdown",
                               breakdown_section(json.loads(Path(args.breakdown).read_text())))
    if args.soak:
        text = replace_section(text, "soak", soak_section(json.loads(Path(args.soak).read_text())))
    readme.write_text(text)
    print(f"updated {readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
