"""Regenerate README.md's performance sections from benchmark JSON.

    python bench/report.py --sumtree build/bench-sumtree.json [--readme README.md]

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


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


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
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    args = ap.parse_args(argv)
    readme = Path(args.readme)
    text = readme.read_text()
    if args.sumtree:
        doc = json.loads(Path(args.sumtree).read_text())
        text = replace_section(text, "sumtree-k", sumtree_k_section(doc))
        text = replace_section(text, "sumtree-compare", sumtree_compare_section(doc))
    readme.write_text(text)
    print(f"updated {readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
