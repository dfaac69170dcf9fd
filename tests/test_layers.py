"""The layering of the tree, read from the sources: #include lines, the
functions each file defines and the names it uses, and Python's imports.

The tree's parts (PARTS, MAY_INCLUDE, MAY_CALL, UPCALLS): the replay engine
(fstack_redis/replay/) at the bottom, the server (the rest of fstack_redis/)
over it, the network stacks (dataplane/) beside it, seeing the server only
through its contract headers (STACK_HEADERS: transport.h's ops table,
constructors and upcalls, the public inreplay.h, the leaf siphash.h), and the
daemon (daemon/: ir_run's life cycle), the composition root over both, which
nothing calls by name. Neither the engine, the server nor the daemon includes a
socket, DPDK or lwIP header; in dataplane/ each file includes DPDK's or lwIP's,
never both (they clash). The control plane (pyctl/) imports no RL code.

Inside fstack_redis/, bottom to top (LAYERS): shared leaf headers, the replay
engine (replay/), protocol and replies, keyspace and types, server core,
commands, the module host (module/: REPLAY.* for stock redis-server). A file may
include files of its own layer and of the layers below it, never above, with
one set of named exceptions (KNOWN_UPWARD: the keyspace telling the server
core that a key changed, the circle still left). The engine is strict: its
files include only each other and inreplay.h, the library's public header, and
no include cycle of modules (x.c with x.h) spans the engine and the server.
The engine's storage headers (ENGINE_PRIVATE: replay/table.h, replay/chunk_store.h)
are its own: no host includes them, and every host file, compiled with its build
flags, sees the types they define as incomplete (HIDDEN_TYPES: a sizeof fails).
The REPLAY.* handlers and the module host (REPLAY_HANDLERS) form no include or
call cycle, but for the edges still listed in KNOWN_HANDLER_CYCLE_*.
Run with -s to see the layer order, what is left of the circles and pyctl's
import cycles.
"""

from __future__ import annotations

import ast
import fnmatch
import posixpath
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
    ("shared leaf headers", ("inreplay.h", "transport.h", "sha1.[ch]", "siphash.h",
                             "strconv.[ch]")),
    ("engine", ("replay/*",)),
    ("protocol and replies", ("server.h", "resp.c", "reply.c", "replay_err.h", "util.c")),
    ("keyspace and types", ("db.[ch]", "db_internal.h", "rdb.[ch]", "notify.[ch]")),
    ("server core", ("server.c", "commands.h", "blocked.[ch]", "multi.[ch]", "pubsub.[ch]",
                     "replication.[ch]", "config.[ch]", "script.[ch]", "snapshot.[ch]",
                     "slowlog.[ch]", "debug.[ch]", "acl.[ch]", "functions.[ch]", "aof.[ch]")),
    ("commands", ("commands.c", "t_*.[ch]", "geo.c", "sort.c", "dump.c", "object.c", "memory.h",
                  "replay_host.h", "replay_host_native.h", "param_host.h", "param_native.c")),
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
    """x.c and x.h are one module (db_internal.h is db's, the chunk store's
    private storage header replay/chunk_store.h is replay/chunks')."""
    stem = rel.rsplit(".", 1)[0]
    return {"db_internal": "db", "replay/chunk_store": "replay/chunks"}.get(stem, stem)


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


# What the REPLAY.* and PARAM.* handlers may include: the engine, the host
# interfaces (replay_host.h, param_host.h; the native host's wrappers come through
# them) and each other. They are compiled for both hosts, so no server header may
# appear here.
HANDLER_INCLUDES = {"replay_host.h", "replay_err.h", "strconv.h", "t_replay.h", "t_traj.h",
                    "inreplay.h", "param_host.h", "t_param.h", "module/host_param.h",
                    "t_limiter_gate.h", "t_sample_reply.h", "t_shard_group.h"}
# the pieces more than one REPLAY.* handler file uses, each in its own file
HANDLER_SHARED = ("t_limiter_gate", "t_sample_reply", "t_shard_group")


def test_replay_handlers_see_their_host_only_through_replay_host_h() -> None:
    offenders = []
    shared = [f"{m}.{x}" for m in HANDLER_SHARED for x in "ch"]
    for name in ("t_replay.c", "t_traj.c", "t_replay.h", "t_traj.h", "replay_err.h",
                 "module/host_module.c", "t_param.c", "t_param.h", "param_host.h",
                 "module/host_param.c", "module/host_param.h", *shared):
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


# ---- the tree's parts: engine, server, stacks, daemon ------------------------

# Each part's folders (a file belongs to the part of its longest matching folder).
PARTS: dict[str, tuple[str, ...]] = {
    "engine": ("fstack_redis/replay",),
    "server": ("fstack_redis",),
    "dataplane": ("dataplane",),
    "daemon": ("daemon",),
}
# Whose files a part may #include besides its own. The stacks include only
# STACK_HEADERS of the server; the daemon reaches the stacks through
# transport.h (their constructors are declared there), never a dataplane header.
MAY_INCLUDE: dict[str, set[str]] = {
    "engine": set(),
    "server": {"engine"},
    "dataplane": set(),
    "daemon": {"server", "engine"},
}
# The server's headers a stack may include: the transport interface, the
# library's public header, SipHash for lwIP's initial sequence numbers.
STACK_HEADERS = {"fstack_redis/transport.h", "fstack_redis/inreplay.h", "fstack_redis/siphash.h"}
# Single headers of another part that a part may include (beyond MAY_INCLUDE).
MAY_INCLUDE_HEADERS: dict[str, set[str]] = {
    "engine": {"fstack_redis/inreplay.h"},  # the library's public types and codes
    "dataplane": STACK_HEADERS,
}
# Whose functions a part may call by name besides its own. Nobody calls the
# daemon's: the server's counters reach DPDK's telemetry through the
# ir_stats_source the daemon hands the stack, not through ir_get_stats.
MAY_CALL: dict[str, set[str]] = {
    "engine": set(),
    "server": {"engine"},
    "dataplane": set(),
    "daemon": {"server", "engine", "dataplane"},
}
# Calls down the tree into a part above, each named by the header of the lower
# part that declares them: the engine's pin.h (its host implements it) and
# transport.h's upcalls and services (the server implements them for the stacks).
UPCALLS: dict[str, tuple[str, ...]] = {
    "engine": ("fstack_redis/replay/pin.h",),
    "dataplane": ("fstack_redis/transport.h",),
}
# The quoted-include path of each part (meson.build's inc, and lwIP's options
# folder for the lwIP glue); a quoted include looks beside the file first.
PART_INCLUDE_DIRS: dict[str, tuple[str, ...]] = {
    "engine": ("fstack_redis/replay",),
    "server": ("fstack_redis", "fstack_redis/replay"),
    "dataplane": ("fstack_redis", "fstack_redis/replay", "dataplane/lwip"),
    "daemon": ("fstack_redis", "fstack_redis/replay"),
}
# No socket, DPDK or lwIP header in these parts: they see the network only
# through transport.h.
NETWORK_FREE = ("engine", "server", "daemon")
NETWORK_HEADERS = re.compile(
    r'^\s*#\s*include\s*[<"]('
    r"sys/socket\.h|netinet/[^>\"]*|arpa/[^>\"]*|netdb\.h|net/[^>\"]*|linux/if_[^>\"]*"
    r"|rte_[^>\"]*|lwip/[^>\"]*|netif/[^>\"]*|lwipopts\.h"
    r')[>"]',
    re.M,
)
DPDK_HEADER = re.compile(r'^\s*#\s*include\s*[<"]rte_[^>"]*[>"]', re.M)
LWIP_HEADER = re.compile(r'^\s*#\s*include\s*[<"](lwip/|netif/|lwipopts\.h)[^>"]*[>"]', re.M)

# The REPLAY.* handlers and the module host, by module (x.c with x.h): no
# include or call cycle among them. Calls through the host interface
# (replay_host.h, replay_err.h: each host implements them) are not edges.
REPLAY_HANDLERS = ("fstack_redis/t_replay", "fstack_redis/t_traj",
                   "fstack_redis/module/host_module")
HOST_INTERFACE = ("fstack_redis/replay_host.h", "fstack_redis/replay_err.h")
# The edges of the cycles still there: (including file, included file), and
# (calling file, called function, defining file). Each must still be on a
# cycle, so the lists only shrink as the handlers are pulled apart.
KNOWN_HANDLER_CYCLE_INCLUDES: set[tuple[str, str]] = set()  # none left: any cycle fails
KNOWN_HANDLER_CYCLE_CALLS: set[tuple[str, str, str]] = set()

# C without comments and literals (a name in either is not a use).
_NOISE = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
# A function definition at the start of a line: return type, name, parameters, body.
_DEFINITION = re.compile(
    r"^(?P<head>[A-Za-z_][\w \t\n*]*?)\b(?P<name>[A-Za-z_]\w*)\s*\((?P<args>[^;{}]*?)\)\s*\{",
    re.M | re.S)
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def _code(text: str) -> str:
    return _NOISE.sub(lambda m: " " if m.group(0)[0] == "/" else '""', text)


def _definitions(text: str) -> tuple[set[str], set[str]]:
    """(extern functions, all functions) defined in a C file's text."""
    ext, every = set(), set()
    for m in _DEFINITION.finditer(_code(text)):
        head = m.group("head").split()
        if head and head[0] in ("if", "while", "for", "switch", "return", "else", "do"):
            continue
        every.add(m.group("name"))
        if "static" not in head:
            ext.add(m.group("name"))
    return ext, every


def _part(rel: str) -> str | None:
    best = None
    for name, dirs in PARTS.items():
        for d in dirs:
            if rel.startswith(d + "/") and (best is None or len(d) > len(best[1])):
                best = (name, d)
    return best[0] if best else None


def _tree() -> dict[str, str]:
    """Every C source and header of the parts, by path relative to the root."""
    out = {}
    for dirs in PARTS.values():
        for d in dirs:
            for p in sorted((ROOT / d).rglob("*.[ch]")):
                out[p.relative_to(ROOT).as_posix()] = p.read_text()
    return out


def _tree_includes(tree: dict[str, str]) -> list[tuple[str, str]]:
    """(including file, included file) for quoted includes that resolve to a file
    of the tree, as the compiler's include path would find it."""
    out = []
    for rel, text in tree.items():
        part = _part(rel)
        here = rel.rsplit("/", 1)[0]
        for name in INCLUDE.findall(text):
            for d in (here, *PART_INCLUDE_DIRS.get(part or "", ())):
                cand = posixpath.normpath(posixpath.join(d, name))
                if cand in tree:
                    out.append((rel, cand))
                    break
    return out


def _include_offenders(tree: dict[str, str]) -> list[str]:
    bad = []
    for a, b in _tree_includes(tree):
        pa, pb = _part(a), _part(b)
        if pa == pb or pb in MAY_INCLUDE[pa]:
            continue
        if b in MAY_INCLUDE_HEADERS.get(pa, ()):
            continue
        bad.append(f"{a} ({pa}) includes {b} ({pb})")
    return bad


def _call_offenders(tree: dict[str, str]) -> list[str]:
    """Uses of a function defined in another part that MAY_CALL does not allow,
    unless a header of the using part's UPCALLS declares it. The uses read are
    the C files' (a header's declaration of a function is no call)."""
    defined: dict[str, set[str]] = {}  # function -> the parts that define it
    own: dict[str, set[str]] = {}
    for rel, text in tree.items():
        if rel.endswith(".c"):
            ext, every = _definitions(text)
            own[rel] = every
            for name in ext:
                defined.setdefault(name, set()).add(_part(rel) or "")
    upcalls = {part: {n for h in heads for n in _CALLED.findall(_code(tree.get(h, "")))}
               for part, heads in UPCALLS.items()}
    bad = []
    for rel, text in tree.items():
        if not rel.endswith(".c"):
            continue
        part = _part(rel)
        for name in sorted(set(_NAME.findall(_code(text))) - own.get(rel, set())):
            for where in sorted(defined.get(name, ())):
                if where == part or where in MAY_CALL[part] or name in upcalls.get(part, ()):
                    continue
                bad.append(f"{rel} ({part}) uses {name}, defined in the {where}")
    return bad


def test_parts_include_only_what_they_may() -> None:
    tree = _tree()
    assert {"daemon/daemon.c", "dataplane/kernel.c", "dataplane/dpdk.c",
            "dataplane/lwip_glue.c", "dataplane/shm.c", "dataplane/shm_client.c"} <= set(tree), \
        "the daemon's life cycle is daemon/daemon.c; dataplane/ holds the stacks"
    assert not [r for r in tree if _part(r) == "dataplane" and "run" in r.rsplit("/", 1)[1]]
    edges = _tree_includes(tree)
    # the rule sees real edges: the stacks include transport.h, the daemon the server
    assert ("dataplane/kernel.c", "fstack_redis/transport.h") in edges
    assert ("daemon/daemon.c", "fstack_redis/server.h") in edges
    bad = _include_offenders(tree)
    assert not bad, "includes across the parts that the layering forbids:\n" + "\n".join(bad)


def test_parts_call_only_what_they_may() -> None:
    tree = _tree()
    bad = _call_offenders(tree)
    assert not bad, "calls across the parts that the layering forbids:\n" + "\n".join(bad)
    # what the rule reads: the daemon defines ir_run and ir_get_stats, the stacks'
    # upcalls come from transport.h, the engine's from pin.h
    ext, _ = _definitions(tree["daemon/daemon.c"])
    assert {"ir_run", "ir_get_stats", "ir_get_table_stats", "ir_stacks"} <= ext
    ext, _ = _definitions(tree["fstack_redis/server.c"])
    assert {"irs_accept", "irs_data", "irs_tcp_keepalive"} <= ext
    assert "ir_get_stats" not in _NAME.findall(_code(tree["dataplane/dpdk.c"]))


def test_the_part_rules_catch_what_they_must() -> None:
    """The same checks on a small tree with one of each forbidden edge."""
    tree = {
        "fstack_redis/server.h": "void serverThing(void);\n",
        "fstack_redis/transport.h": "void irs_data(int x);\nvoid serverLog(const char *f, ...);\n",
        "fstack_redis/server.c": '#include "server.h"\n#include "transport.h"\n'
                                 "void serverThing(void) {}\nvoid irs_data(int x) {}\n"
                                 "void serverLog(const char *f, ...) {}\n"
                                 "void ok(void) { /* ir_get_stats() */ }\n"
                                 "void up(void) { ir_kernel_transport_new(); }\n",
        "fstack_redis/replay/replay.c": '#include "server.h"\nvoid tableX(void) {}\n',
        "dataplane/kernel.c": '#include "transport.h"\n#include "server.h"\n'
                              "ir_transport *ir_kernel_transport_new(void) {\n"
                              '    irs_data(1); serverLog("x"); serverThing(); ir_get_stats();\n'
                              "    return 0;\n}\n"
                              "static void tableX(void) {}\n",
        "daemon/daemon.c": '#include "server.h"\n#include "../dataplane/kernel.h"\n'
                           "void ir_get_stats(void) {}\nint ir_run(void) { serverThing(); }\n",
        "dataplane/kernel.h": "",
    }
    inc = _include_offenders(tree)
    assert inc == ["dataplane/kernel.c (dataplane) includes fstack_redis/server.h (server)",
                   "daemon/daemon.c (daemon) includes dataplane/kernel.h (dataplane)"], inc
    # replay.c's "server.h" resolves beside it only (the engine's path): not found
    # here, so no edge; the engine's own include test reports such a file
    calls = _call_offenders(tree)
    assert calls == [
        "fstack_redis/server.c (server) uses ir_kernel_transport_new, defined in the dataplane",
        "dataplane/kernel.c (dataplane) uses ir_get_stats, defined in the daemon",
        "dataplane/kernel.c (dataplane) uses serverThing, defined in the server",
    ], calls
    ext, every = _definitions("static int a(void) {\n}\nint\nb(int (*f)(void)) {\n"
                              "  if (x) {\n}\n}\n")
    assert ext == {"b"} and every == {"a", "b"}


def test_network_headers_stay_in_the_stacks() -> None:
    tree = _tree()
    bad = []
    for rel, text in tree.items():
        if _part(rel) in NETWORK_FREE:
            bad += [f"{rel}: #include {m.group(1)}" for m in NETWORK_HEADERS.finditer(text)]
    assert not bad, "the server and the daemon see the network only through transport.h:\n" + \
        "\n".join(bad)
    # DPDK's and lwIP's headers clash (meson builds dpdk.c and lwip_glue.c apart)
    both = [r for r, t in tree.items()
            if _part(r) == "dataplane" and DPDK_HEADER.search(t) and LWIP_HEADER.search(t)]
    assert not both, f"a file includes both DPDK's and lwIP's headers: {both}"
    assert DPDK_HEADER.search(tree["dataplane/dpdk.c"])
    assert LWIP_HEADER.search(tree["dataplane/lwip_glue.c"])


def test_the_network_pattern_catches_what_it_must() -> None:
    for line in ("#include <sys/socket.h>", '#include "lwip/tcp.h"', "#include <rte_mbuf.h>",
                 "#  include <arpa/inet.h>", "#include <netinet/in.h>"):
        assert NETWORK_HEADERS.search(line), line
    for line in ("#include <stdio.h>", '#include "transport.h"', "#include <sys/uio.h>"):
        assert not NETWORK_HEADERS.search(line), line


def _handler_module(rel: str) -> str | None:
    stem = rel.rsplit(".", 1)[0]
    return stem if stem in REPLAY_HANDLERS else None


def _cycle_edges(edges: set[tuple[str, str, object]]) -> set[tuple[str, str, object]]:
    """The edges (module a, module b, label) that lie on a cycle."""
    graph: dict[str, set[str]] = {}
    for a, b, _ in edges:
        graph.setdefault(a, set()).add(b)
    comp = {m: i for i, c in enumerate(_sccs(graph)) for m in c}
    return {(a, b, x) for a, b, x in edges if a != b and comp[a] == comp[b]}


def test_no_include_cycle_among_the_replay_handlers() -> None:
    tree = _tree()
    edges = set()
    for a, b in _tree_includes(tree):
        ma, mb = _handler_module(a), _handler_module(b)
        if ma and mb and ma != mb:
            edges.add((ma, mb, (a, b)))
    on_cycle = {x for _, _, x in _cycle_edges(edges)}
    print(f"\ninclude edges on a cycle among the REPLAY handlers: {sorted(on_cycle)}")
    new = sorted(on_cycle - KNOWN_HANDLER_CYCLE_INCLUDES)
    gone = sorted(KNOWN_HANDLER_CYCLE_INCLUDES - on_cycle)
    assert not new, f"include cycles among the REPLAY handlers: {new}"
    assert not gone, f"no longer on a cycle: take these out of KNOWN_HANDLER_CYCLE_INCLUDES: {gone}"


def test_no_call_cycle_among_the_replay_handlers() -> None:
    tree = _tree()
    files = [r for r in tree if r.endswith(".c") and _handler_module(r)]
    defs = {r: _definitions(tree[r])[0] for r in files}
    interface = {n for h in HOST_INTERFACE for n in _CALLED.findall(_code(tree[h]))}
    edges = set()
    for a in files:
        used = set(_NAME.findall(_code(tree[a])))
        for b in files:
            if b != a:
                for name in (used & defs[b]) - interface:
                    edges.add((_handler_module(a), _handler_module(b), (a, name, b)))
    assert edges, "the REPLAY handlers call each other somewhere (host_module.c -> t_replay.c)"
    on_cycle = {x for _, _, x in _cycle_edges(edges)}
    print(f"\ncalls on a cycle among the REPLAY handlers: {len(on_cycle)}")
    for x in sorted(on_cycle):
        print(f"  {x[0]} -> {x[1]} ({x[2]})")
    new = sorted(on_cycle - KNOWN_HANDLER_CYCLE_CALLS)
    gone = sorted(KNOWN_HANDLER_CYCLE_CALLS - on_cycle)
    assert not new, f"call cycles among the REPLAY handlers: {new}"
    assert not gone, f"no longer on a cycle: take these out of KNOWN_HANDLER_CYCLE_CALLS: {gone}"


def test_the_cycle_edge_finder() -> None:
    edges = {("a", "b", 1), ("b", "a", 2), ("b", "c", 3), ("c", "d", 4)}
    assert _cycle_edges(edges) == {("a", "b", 1), ("b", "a", 2)}


# ---- the engine's storage: hosts call functions only --------------------------

# The engine's private headers: the storage of its opaque types. Only the engine
# (fstack_redis/replay/) includes them; every host sees the types declared only
# (replay.h, chunks.h), so it reads and changes them through the engine's functions.
ENGINE_PRIVATE = ("fstack_redis/replay/table.h", "fstack_redis/replay/chunk_store.h")
# The types they hide, as a host would name them (struct tags: ir_chunk has no
# typedef outside chunk_store.h).
HIDDEN_TYPES = ("struct ir_table", "struct ir_tables", "struct ir_chunk_store",
                "struct ir_stream", "struct ir_traj_layout", "struct ir_chunk")


def _private_include_offenders(tree: dict[str, str]) -> list[str]:
    return [f"{a} includes {b}" for a, b in _tree_includes(tree)
            if b in ENGINE_PRIVATE and _part(a) != "engine"]


def test_no_host_includes_the_engines_storage() -> None:
    tree = _tree()
    assert set(ENGINE_PRIVATE) <= set(tree)
    # the engine's own files do include them (the rule reads real edges)
    edges = _tree_includes(tree)
    assert ("fstack_redis/replay/replay.c", "fstack_redis/replay/table.h") in edges
    assert ("fstack_redis/replay/chunks.c", "fstack_redis/replay/chunk_store.h") in edges
    bad = _private_include_offenders(tree)
    assert not bad, "a host includes the engine's storage (call the engine's functions):\n" + \
        "\n".join(bad)
    # nor does a public engine header reach them
    for pub in ("replay.h", "chunks.h", "persist.h", "limiter.h", "options.h", "pin.h"):
        text = tree[f"fstack_redis/replay/{pub}"]
        assert not {n for n in INCLUDE.findall(text)} & {"table.h", "chunk_store.h"}, pub
    assert not [r for r in tree if "IR_TABLE_OPAQUE" in tree[r]], \
        "opaque is the default: no IR_TABLE_OPAQUE"


def test_the_private_include_rule_catches_a_host() -> None:
    tree = {"fstack_redis/replay/table.h": "", "fstack_redis/replay/chunk_store.h": "",
            "fstack_redis/replay/replay.c": '#include "table.h"\n',
            "fstack_redis/t_replay.c": '#include "table.h"\n',
            "fstack_redis/module/host_module.c": '#include "replay/chunk_store.h"\n',
            "daemon/daemon.c": '#include "../fstack_redis/replay/table.h"\n'}
    assert _private_include_offenders(tree) == [
        "fstack_redis/t_replay.c includes fstack_redis/replay/table.h",
        "fstack_redis/module/host_module.c includes fstack_redis/replay/chunk_store.h",
        "daemon/daemon.c includes fstack_redis/replay/table.h"]


_INCOMPLETE = re.compile(r"(?:invalid application of .sizeof. to incomplete type"
                         r"|invalid use of incomplete typedef) .(struct \w+|\w+).")


def _probe(entry: dict[str, str], probe: Path) -> tuple[int, str]:
    """Compile the file of a compile_commands.json entry with its own flags, followed
    by sizeof of every hidden type (in the file probe): (exit status, the compiler's
    diagnostics)."""
    import shlex
    import subprocess

    src = Path(posixpath.normpath(posixpath.join(entry["directory"], entry["file"])))
    body = "".join(f"extern const unsigned long ir_probe_{i};\n"
                   f"const unsigned long ir_probe_{i} = sizeof({t});\n"
                   for i, t in enumerate(HIDDEN_TYPES))
    probe.write_text(f'#include "{src}"\n{body}')
    argv, skip = [], False
    words = shlex.split(entry["command"])
    for w in words[1:]:
        if skip:
            skip = False
        elif w in ("-o", "-MQ", "-MF", "-c"):
            skip = True
        elif w not in ("-MD", "-Werror", "-fdiagnostics-color=always"):
            argv.append(w)
    r = subprocess.run([words[0], *argv, "-fsyntax-only", "-fdiagnostics-color=never",
                        str(probe)], cwd=entry["directory"], capture_output=True, text=True)
    return r.returncode, r.stderr


def test_each_host_compiles_with_the_engines_types_incomplete(tmp_path: Path) -> None:
    """Each host file that includes the engine, compiled as the build compiles it (both
    hosts' objects: the module's t_replay.c is -DIR_HOST_MODULE), then sizeof of each
    hidden type: every one fails as an incomplete type, and nothing else fails. The
    same probe after an engine file compiles, so it is the headers that hide them."""
    import json
    from concurrent.futures import ThreadPoolExecutor

    import pytest

    cc = ROOT / "build" / "compile_commands.json"
    if not cc.is_file():
        pytest.skip("no build/compile_commands.json (meson setup build)")
    tree = _tree()
    hosts = {a for a, b in _tree_includes(tree)
             if a.endswith(".c") and _part(a) != "engine" and b.startswith("fstack_redis/replay/")}
    assert {"fstack_redis/t_replay.c", "fstack_redis/t_traj.c", "fstack_redis/blocked.c",
            "fstack_redis/module/host_module.c", "daemon/daemon.c",
            "fstack_redis/snapshot.c"} <= hosts
    entries = []
    for e in json.loads(cc.read_text()):
        rel = posixpath.relpath(posixpath.normpath(posixpath.join(e["directory"], e["file"])),
                                ROOT.as_posix())
        if rel in hosts or rel in ("fstack_redis/replay/replay.c", "fstack_redis/replay/chunks.c"):
            entries.append((rel, e))
    seen = {rel for rel, _ in entries}
    assert hosts <= seen, f"not in the build: {sorted(hosts - seen)}"
    with ThreadPoolExecutor(2) as ex:
        results = list(ex.map(lambda k: (entries[k][0], *_probe(entries[k][1],
                                                                 tmp_path / f"probe{k}.c")),
                              range(len(entries))))
    bad = []
    engine_ok = 0
    for rel, rc, err in results:
        errors = [ln for ln in err.splitlines() if "error:" in ln]
        if _part(rel) == "engine":
            # replay.c sees table.h, chunks.c chunk_store.h: their types are complete
            want = {"struct ir_table", "struct ir_tables"} if rel.endswith("replay.c") \
                else {"struct ir_chunk_store", "struct ir_stream", "struct ir_chunk"}
            got = set(_INCOMPLETE.findall(err))
            assert not got & want, f"{rel}: {sorted(got & want)} incomplete in the engine"
            engine_ok += 1
            continue
        got = set(_INCOMPLETE.findall(err))
        other = [ln for ln in errors if not _INCOMPLETE.search(ln)]
        if rc == 0 or got != set(HIDDEN_TYPES) or other:
            bad.append(f"{rel}: sees {sorted(set(HIDDEN_TYPES) - got)} complete"
                       + (f"; other errors: {other[:3]}" if other else ""))
    assert engine_ok >= 2, "the positive control (engine files) did not run"
    assert len(results) - engine_ok >= len(hosts)
    assert not bad, "hosts that see the engine's storage:\n" + "\n".join(bad)


# ---- Python: the control plane imports no RL code ---------------------------

RL_PACKAGES = {"actors", "learner", "integrations"}


def _imports(path: Path, package: str, toplevel_only: bool = False) -> set[str]:
    """Dotted names a module imports (relative imports resolved against package);
    toplevel_only: only what runs at import time (not inside functions)."""
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    nodes = ast.walk(tree)
    if toplevel_only:
        nodes = (n for n in _toplevel_nodes(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def _toplevel_nodes(tree: ast.AST) -> list[ast.AST]:
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(tree))
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.dump(n.test):
            continue
        out.append(n)
        todo.extend(ast.iter_child_nodes(n))
    return out


def test_control_plane_imports_no_rl_code() -> None:
    offenders = []
    for path in sorted((ROOT / "pyctl").rglob("*.py")):
        names = _imports(path, "pyctl")
        bad = {n for n in names if n.split(".")[0] in RL_PACKAGES | {"inreplay"}}
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "pyctl must not import RL code (nor inreplay, which re-exports " \
        "the client beside it):\n" + "\n".join(offenders)
    assert (ROOT / "integrations").is_dir() and (ROOT / "actors").is_dir()


def test_pyctl_import_cycles_are_reported() -> None:
    """Prints pyctl's import cycles among its modules (run with -s): those at import
    time, and those through imports inside functions too. Reported, not asserted."""
    modules = {p.stem: p for p in (ROOT / "pyctl").glob("*.py") if p.stem != "__main__"}
    for toplevel in (True, False):
        graph: dict[str, set[str]] = {}
        for name, path in modules.items():
            for imp in _imports(path, "pyctl", toplevel_only=toplevel):
                parts = imp.split(".")
                if parts[0] == "pyctl" and len(parts) > 1 and parts[1] in modules:
                    if parts[1] != name:
                        graph.setdefault(name, set()).add(parts[1])
        graph.pop("__init__", None)  # the package re-exports; importing it imports all
        circles = sorted(sorted(c) for c in _sccs(graph) if len(c) > 1)
        when = "at import time" if toplevel else "including imports inside functions"
        print(f"\npyctl import cycles ({when}): {circles or 'none'}")
    assert "client" in modules and "sharded" in modules
