"""The layers of fstack_redis/, read from the #include lines of its sources.

Bottom to top (LAYERS): shared leaf headers, the replay engine (replay/),
protocol and replies, keyspace and types, server core, commands, the module
host (module/: REPLAY.* for stock redis-server). A file may
include files of its own layer and of the layers below it, never above, with
one set of named exceptions (KNOWN_UPWARD: the keyspace telling the server
core that a key changed, the circle still left). The engine is strict: its
files include only each other and inreplay.h, the library's public header, and
no include cycle of modules (x.c with x.h) spans the engine and the server.
Run with -s to see the layer order and what is left of the circle.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "fstack_redis"
ENGINE = SRC / "replay"
# the server's include path (meson.build's inc); a quoted include looks beside the file first
INCLUDE_DIRS = (SRC, ENGINE)
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)

# Bottom to top: (name, file patterns relative to fstack_redis/).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("shared leaf headers", ("inreplay.h", "transport.h", "sha1.[ch]", "strconv.[ch]")),
    ("engine", ("replay/*",)),
    ("protocol and replies", ("server.h", "resp.c", "reply.c", "replay_err.h", "util.c")),
    ("keyspace and types", ("db.[ch]", "db_internal.h", "rdb.[ch]", "notify.[ch]")),
    ("server core", ("server.c", "commands.h", "blocked.[ch]", "multi.[ch]", "pubsub.[ch]",
                     "replication.[ch]", "config.[ch]", "script.[ch]", "snapshot.[ch]",
                     "slowlog.[ch]", "debug.[ch]", "acl.[ch]", "functions.[ch]", "aof.[ch]")),
    ("commands", ("commands.c", "t_*.[ch]", "geo.c", "sort.c", "dump.c", "object.c", "memory.h",
                  "replay_host.h", "replay_host_native.h")),
    ("module host", ("module/*",)),
]

# Includes that still point up a layer: db.c and notify.c signal the server
# core (blocked clients, WATCH, keyspace events, replication, scripts) when a
# key changes; rdb.c writes and reads the function libraries in the RDB image a
# replica loads (functions.h), as Redis's rdb.c does. Each entry must still
# exist, so the list only shrinks.
KNOWN_UPWARD = {
    ("db.c", "blocked.h"), ("db.c", "commands.h"), ("db.c", "multi.h"),
    ("db.c", "replication.h"), ("db.c", "script.h"),
    ("notify.c", "blocked.h"), ("notify.c", "multi.h"), ("notify.c", "pubsub.h"),
    ("notify.c", "replication.h"), ("rdb.c", "functions.h"),
}


def _sources() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.[ch]"))


def _rel(p: Path) -> str:
    return p.resolve().relative_to(SRC.resolve()).as_posix()


def _resolve(src: Path, name: str) -> Path | None:
    for d in (src.parent, *INCLUDE_DIRS):
        q = (d / name).resolve()
        if q.is_file():
            return q
    return None


def _includes() -> list[tuple[str, str]]:
    """(including file, included file), both relative to fstack_redis/; only
    includes of files in fstack_redis/ (system headers resolve to nothing)."""
    out = []
    for f in _sources():
        for name in INCLUDE.findall(f.read_text()):
            q = _resolve(f, name)
            if q is not None and SRC.resolve() in q.parents:
                out.append((_rel(f), _rel(q)))
    return out


def _layer(rel: str) -> int:
    hits = [i for i, (_, pats) in enumerate(LAYERS) if any(fnmatch.fnmatch(rel, p) for p in pats)]
    assert len(hits) == 1, f"{rel} must be in exactly one layer, is in {hits}"
    return hits[0]


def _is_engine(rel: str) -> bool:
    return rel.startswith("replay/")


def _module(rel: str) -> str:
    """x.c and x.h are one module (db_internal.h is db's)."""
    stem = rel.rsplit(".", 1)[0]
    return {"db_internal": "db"}.get(stem, stem)


def _sccs(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []
    nodes = sorted(set(edges) | {w for ws in edges.values() for w in ws})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.add(x)
                    if x == v:
                        break
                out.append(comp)
    return out


def test_every_file_has_one_layer_and_the_order_is_printed() -> None:
    files = [_rel(p) for p in _sources()]
    by_layer: dict[int, list[str]] = {}
    for rel in files:
        by_layer.setdefault(_layer(rel), []).append(rel)
    print("\nlayers of fstack_redis/, bottom to top:")
    for i, (name, _) in enumerate(LAYERS):
        print(f"  {i} {name}: {' '.join(by_layer.get(i, []))}")
        assert by_layer.get(i), f"layer {name} has no file"
    assert [n for n, _ in LAYERS] == ["shared leaf headers", "engine", "protocol and replies",
                                      "keyspace and types", "server core", "commands",
                                      "module host"]


def test_the_engine_includes_only_itself_and_inreplay_h() -> None:
    offenders = []
    engine_files = [_rel(p) for p in ENGINE.rglob("*.[ch]")]
    assert {"replay/replay.h", "replay/replay.c", "replay/sumtree.c", "replay/chunks.h",
            "replay/chunks.c", "replay/pin.h"} <= set(engine_files)
    for f in ENGINE.rglob("*.[ch]"):
        for name in INCLUDE.findall(f.read_text()):
            q = _resolve(f, name)
            # resolved beside the file only: the engine's include path is its folder
            local = (f.parent / name).resolve()
            if not local.is_file():
                offenders.append(f"{_rel(f)}: #include \"{name}\" is not beside it")
                continue
            if not (_is_engine(_rel(local)) or _rel(local) == "inreplay.h"):
                offenders.append(f"{_rel(f)}: #include \"{name}\" ({_rel(q or local)})")
    assert not offenders, "the engine must include no server header:\n" + "\n".join(offenders)


def test_the_engine_builds_from_its_folder_alone() -> None:
    build = (ENGINE / "meson.build").read_text()
    for name in re.findall(r"'([^']+\.c)'", build):
        assert ".." not in name and (ENGINE / name).is_file(), name
    for name in ("sumtree.c", "replay.c", "chunks.c"):
        assert f"'{name}'" in build
        assert f"'{name}'" not in (SRC / "meson.build").read_text()
    # its C tests: only engine headers (and the tests' check.h)
    tests = ROOT / "tests" / "c"
    m = re.search(r"foreach t : \[([^\]]*)\]\s*\n\s*exe = executable\(t, t \+ '\.c', 'pin_stub\.c'",
                  (tests / "meson.build").read_text())
    assert m, "tests/c/meson.build: the engine's tests link pin_stub.c and the engine alone"
    names = re.findall(r"'(\w+)'", m.group(1))
    assert {"test_sumtree", "test_chunks"} <= set(names)
    # one test per selector, over the shared model (selector_model.h)
    sels = sorted(p.stem for p in (ENGINE / "selectors").glob("*.c"))
    sel_tests = sorted(p.stem for p in (tests / "selectors").glob("test_sel_*.c"))
    assert [f"test_sel_{s}" for s in sels if s not in ("heap", "selectors")] == sel_tests
    files = [tests / f"{t}.c" for t in [*names, "pin_stub"]]
    files += [tests / "selector_model.h", *((tests / "selectors").glob("*.c"))]
    for f in files:
        for inc in INCLUDE.findall(f.read_text()):
            q = (tests / inc).resolve()
            rel = _rel(q) if SRC.resolve() in q.parents else None
            ok = inc in ("check.h", "selector_model.h") or (ENGINE / inc).is_file()
            assert ok or rel == "inreplay.h", f"{f.name} includes {inc}: not the engine's"


def test_no_include_points_up_a_layer_but_the_known_ones() -> None:
    up = set()
    for a, b in _includes():
        if _layer(b) > _layer(a):
            up.add((a, b))
    new = sorted(up - KNOWN_UPWARD)
    gone = sorted(KNOWN_UPWARD - up)
    print(f"\nincludes that still point up a layer: {len(up)}")
    for a, b in sorted(up):
        print(f"  {a} ({LAYERS[_layer(a)][0]}) -> {b} ({LAYERS[_layer(b)][0]})")
    assert not new, f"includes that point up a layer: {new}"
    assert not gone, f"fixed: take these out of KNOWN_UPWARD: {gone}"


def test_no_cycle_spans_the_engine_and_the_server() -> None:
    edges: dict[str, set[str]] = {}
    for a, b in _includes():
        ma, mb = _module(a), _module(b)
        if ma != mb:
            edges.setdefault(ma, set()).add(mb)
    # nothing in the engine reaches the server at all
    for m, ws in edges.items():
        if _is_engine(m):
            assert all(_is_engine(w) or w == "inreplay" for w in ws), (m, ws)
    circles = [c for c in _sccs(edges) if len(c) > 1]
    for c in circles:
        assert not any(_is_engine(m) for m in c), f"a cycle through the engine: {sorted(c)}"
        assert not any(_layer(m + ".h") <= 1 for m in c if (SRC / (m + ".h")).is_file()), c
    print(f"\nmodule circles left (x.c with x.h): {[sorted(c) for c in circles]}")


def test_the_cycle_finder_finds_cycles() -> None:
    comps = _sccs({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert {"a", "b", "c"} in comps and {"d"} in comps


# What the REPLAY.* handlers may include: the engine, the host interface
# (replay_host.h; the native host's wrappers come through it) and each other.
# They are compiled for both hosts, so no server header may appear here.
HANDLER_INCLUDES = {"replay_host.h", "replay_err.h", "strconv.h", "t_replay.h", "t_traj.h",
                    "t_limiter_gate.h", "t_sample_reply.h", "t_shard_group.h", "inreplay.h"}
# the pieces more than one REPLAY.* handler file uses, each in its own file
HANDLER_SHARED = ("t_limiter_gate", "t_sample_reply", "t_shard_group")


def test_replay_handlers_see_their_host_only_through_replay_host_h() -> None:
    offenders = []
    shared = [f"{m}.{x}" for m in HANDLER_SHARED for x in "ch"]
    for name in ("t_replay.c", "t_traj.c", "t_replay.h", "t_traj.h", "replay_err.h",
                 "module/host_module.c", *shared):
        f = SRC / name
        for inc in INCLUDE.findall(f.read_text()):
            q = _resolve(f, inc)
            if q is None:  # generated, or Redis's redismodule.h (the module's path only)
                assert name.startswith("module/"), (name, inc)
                assert inc in ("redismodule.h", "module_commands.inc"), (name, inc)
                continue
            rel = _rel(q)
            if not (_is_engine(rel) or rel in HANDLER_INCLUDES):
                offenders.append(f"{name}: #include \"{inc}\"")
    assert not offenders, "REPLAY.* handlers include a server header:\n" + "\n".join(offenders)


def test_no_cycle_among_the_replay_handlers_and_the_module_host() -> None:
    """t_replay.c may call t_traj.c (a TRAJECTORY table's sample), never the
    reverse; what both use (the limiter's gate, the sample reply's parts, the
    shard group's members) is in files of its own, which include neither."""
    inc = {}
    for name in ("t_replay.c", "t_traj.c", "module/host_module.c",
                 *[f"{m}.c" for m in HANDLER_SHARED]):
        inc[name] = set(INCLUDE.findall((SRC / name).read_text()))
    assert "t_replay.h" not in inc["t_traj.c"]
    for m in HANDLER_SHARED:
        assert not {"t_replay.h", "t_traj.h"} & inc[f"{m}.c"], m
    assert "t_traj.h" in inc["t_replay.c"]


def test_the_module_build_reads_no_server_header() -> None:
    """The headers ninja recorded for the module's objects (the compiler's own
    dependency lists): with -DIR_HOST_MODULE nothing reaches the server's."""
    import shutil
    import subprocess

    import pytest

    build = ROOT / "build"
    ninja = shutil.which("ninja")
    if not ninja or not (build / "fstack_redis" / "module" / "inreplay_module.so").is_file():
        pytest.skip("the module is not built (make build with Redis's source in build-deps/)")
    out = subprocess.run([ninja, "-C", str(build), "-t", "deps"], capture_output=True,
                         text=True, check=True).stdout
    server_side = {"server.h", "blocked.h", "commands.h", "db.h", "replay_host_native.h"}
    seen = 0
    for block in out.split("\n\n"):
        head = block.split(":", 1)[0]
        if "inreplay_module.so.p" not in head:
            continue
        seen += 1
        names = {Path(w.strip()).name for w in block.splitlines()[1:]}
        assert not names & server_side, f"{head} reads {sorted(names & server_side)}"
        if "t_replay.c" in head:
            assert "replay_host.h" in names and "redismodule.h" not in names
    assert seen >= 3, "no dependency lists of the module's objects (ninja -t deps)"
