"""No dead C code: every global symbol the server's libraries define is
used, by another place in the libraries (a relocation that names it, in any object
of the build: libraries, C tests, bench programs), by the fuzz harness's sources
(built apart, with clang) or by pyctl through the public header inreplay.h. A
function nothing calls fails here, with its name and object; static functions are
the compiler's (-Wunused-function, warnings are errors)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / os.environ.get("BUILD", "build")
LIBS = ("libinreplay_core", "libinreplay_engine", "libinreplay_dataplane", "libinreplay_dpdk",
        "libinreplay_lwip")


def _symbols(obj: Path) -> tuple[list[str], set[str]]:
    """(global symbols obj defines, symbols its relocations name)."""
    nm = subprocess.run(["nm", "--defined-only", "-g", str(obj)], capture_output=True,
                        text=True, check=True).stdout
    defined = [p[2] for p in (ln.split() for ln in nm.splitlines()) if len(p) == 3]
    rel = subprocess.run(["objdump", "-r", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    named = set()
    for ln in rel.splitlines():
        p = ln.split()
        if len(p) >= 3 and re.fullmatch(r"[0-9a-f]+", p[0]):
            named.add(re.split(r"[-+@]", p[2])[0])
    return defined, named


def test_every_global_symbol_is_used() -> None:
    if not shutil.which("nm") or not shutil.which("objdump"):
        pytest.fail("nm and objdump (binutils) are needed: apt-get install binutils")
    objects = sorted(BUILD.glob("**/*.p/*.o"))
    ours = [o for o in objects if any(f"/{lib}.a.p/" in str(o) for lib in LIBS)]
    assert len(ours) > 30, f"no build in {BUILD}: run make build first"
    defined: dict[str, Path] = {}
    used: defaultdict[str, set[Path]] = defaultdict(set)
    for o in objects:
        d, named = _symbols(o)
        if o in ours:
            for s in d:
                defined.setdefault(s, o)
        for s in named:
            used[s].add(o)
    fuzz = "\n".join(p.read_text() for p in (ROOT / "tests" / "fuzz").glob("*.c"))
    public = set(re.findall(r"\b(ir_\w+)\s*\(", (ROOT / "fstack_redis" / "inreplay.h").read_text()))
    dead = sorted(f"{s} ({o.relative_to(BUILD)})" for s, o in defined.items()
                  if not used[s] and s not in public and "." not in s  # x.resolver: the
                  # compiler's, for a target_clones function (its callers use x)
                  and not re.search(rf"\b{s}\b", fuzz))
    assert not dead, "defined and never used (remove them, or make them static): " + \
        ", ".join(dead)
