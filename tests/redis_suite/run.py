"""Redis's own unit tests as a peer: run Redis 7.0.15's Tcl test suite in
external-server mode against stock redis-server and against inreplay (kernel
stack, and DPDK where the machine allows it), and write a JSON summary.

    python3 tests/redis_suite/run.py [--servers redis,kernel,dpdk] [--units unit/protocol,...]
                                     [--singledb] [--json build/redis-suite.json]

Redis's source comes from Debian's `redis` source package (fetch-source.sh,
into build-deps/redis-src); the repository keeps only this runner, the
skip-list (skiplist.txt: inreplay's skipped tests, one reason per line) and the
harness patches (patches/*.patch, applied to a scratch copy of the harness,
never to the unpacked source).

Every unit runs in its own runtest process against a freshly started server,
so a crash or a hang costs one unit, not the run. The figure is inreplay's
passes over the tests stock redis-server passes in the same mode; a skipped
test counts as not passed.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # pyctl, and tests/helpers.py
from helpers import HOST, die_with_parent, free_port  # noqa: E402

from pyctl import _native  # noqa: E402

UNITS = [
    "unit/protocol", "unit/type/string", "unit/type/list", "unit/type/hash",
    "unit/type/set", "unit/expire", "unit/keyspace", "unit/multi", "unit/pubsub",
    "unit/auth", "unit/info-command", "unit/introspection", "unit/introspection-2",
    "unit/scripting", "unit/functions", "unit/type/stream", "unit/type/stream-cgroups",
    "unit/slowlog", "unit/latency-monitor", "unit/acl", "unit/geo", "unit/hyperloglog",
    "unit/bitops", "unit/bitfield",
]
SERVERS = ["redis", "kernel", "dpdk"]
GOAL = 0.97
"""The goal: inreplay passes this share of the tests stock redis-server passes,
over all of UNITS (the JSON summary carries it to bench/report.py)."""
# The same options for every server: --durable turns a test's runtime error
# (an unknown command, say) into that test's failure instead of aborting the
# unit; --ignore-encoding because OBJECT ENCODING names Redis's internal
# representations (listpack, quicklist, intset), which another server need not
# share.
HARNESS_FLAGS = ["--durable", "--ignore-encoding", "--clients", "1", "--timeout", "120"]
# stock redis-server gets the settings of the harness's tests/assets/default.conf
# that matter to a server it does not start itself (no persistence on disk).
# the suite's DEBUG and CONFIG SET dir need what its default.conf opens, on both servers
OPENED = ["--enable-debug-command", "yes", "--enable-protected-configs", "yes"]
REDIS_ARGS = ["--save", "", "--appendonly", "no", *OPENED, "--enable-module-command", "yes",
              "--latency-monitor-threshold", "1", "--repl-diskless-sync-delay", "0",
              "--notify-keyspace-events", "KEA", "--loglevel", "verbose"]
START_TIMEOUT = 30.0
ANSI = re.compile(r"\x1b\[[0-9;]*m")
STATUS = re.compile(r"^\[(ok|err|skip|ignore|exception|TIMEOUT)\]: (.*)$")


class SuiteError(RuntimeError):
    """A one-line reason the run cannot go on."""


# --------------------------------------------------------------------------
# the harness's output
# --------------------------------------------------------------------------


@dataclass
class UnitResult:
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    ignored: int = 0
    errors: dict[str, str] = field(default_factory=dict)  # failed test -> first error line
    block_errors: list[str] = field(default_factory=list)  # errors outside any test
    exception: str | None = None
    timeout: bool = False

    def summary(self) -> dict[str, Any]:
        return {"passed": len(self.passed), "failed": len(self.failed),
                "skipped": len(self.skipped), "ignored": self.ignored,
                "failed_tests": self.failed, "errors": self.errors,
                "block_errors": self.block_errors, "exception": self.exception,
                "timeout": self.timeout}


def parse_output(text: str) -> UnitResult:
    """Parse runtest's report lines: [ok]: NAME (N ms), [err]: NAME in FILE then
    the error's lines, [skip]: NAME, [ignore]: REASON, [exception]: ..."""
    r = UnitResult()
    lines = ANSI.sub("", text).splitlines()
    i = 0
    while i < len(lines):
        m = STATUS.match(lines[i])
        i += 1
        if not m:
            continue
        kind, data = m.groups()
        if kind == "ok":
            r.passed.append(re.sub(r" \(\d+ ms\)$", "", data))
        elif kind == "skip":
            r.skipped.append(data)
        elif kind == "ignore":
            r.ignored += 1
        elif kind == "TIMEOUT":
            r.timeout = True
        elif kind == "exception":
            body = [data]
            while i < len(lines) and not STATUS.match(lines[i]) and len(body) < 8:
                body.append(lines[i])
                i += 1
            r.exception = "\n".join(body).strip()
        else:  # err: the test's name, then the message on the following lines
            detail = []
            while i < len(lines) and not STATUS.match(lines[i]) \
                    and not lines[i].startswith("*** [err]"):
                detail.append(lines[i])
                i += 1
            tm = re.match(r"^(.*) in tests/\S+\.tcl$", data)
            if tm:
                name = tm.group(1)
                r.failed.append(name)
                r.errors.setdefault(name, _message(detail))
            else:
                r.block_errors.append(_message([data, *detail]))
    return r


def _message(detail: list[str]) -> str:
    """An error's message. With --durable the harness reports a runtime error
    with its first 10 characters cut ("ERR unknow" of "ERR unknown command");
    the stack trace that follows starts with the whole message."""
    lines = [d for d in detail if d.strip()]
    if not lines:
        return ""
    msg = lines[0]
    if len(lines) > 1 and lines[1].endswith(msg) and len(lines[1]) > len(msg):
        return lines[1]
    return msg


def cause_of(message: str) -> str:
    """A failure's message reduced to its cause, to count them across tests."""
    m = re.search(r"unknown command '([^']*)'", message)
    if m:
        return f"unknown command '{m.group(1).lower()}'"
    m = re.search(r"unknown subcommand '([^']*)'\. Try (\S+) HELP", message)
    if m:
        return f"unknown subcommand '{m.group(2).upper()} {m.group(1).lower()}'"
    m = re.search(r"Unknown option or number of arguments for CONFIG SET - '([^']*)'", message)
    if m:
        return f"CONFIG SET {m.group(1)}"
    m = re.search(r"(ERR|WRONGTYPE|NOPROTO|NOAUTH|EXECABORT|BUSY)\b[^.\n]{0,70}", message)
    if m:
        return m.group(0)
    return "assertion: " + message[:80]


# --------------------------------------------------------------------------
# the skip-list
# --------------------------------------------------------------------------


def read_skiplist(path: Path) -> list[tuple[str, str]]:
    """'<test name or /regex> | <reason>' per line; # comments and blank lines."""
    out: list[tuple[str, str]] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, reason = line.rpartition(" | ")
        if not sep or not name.strip() or not reason.strip():
            raise SuiteError(f"{path}:{n}: expected '<test name> | <reason>'")
        out.append((name.strip(), reason.strip()))
    return out


# --------------------------------------------------------------------------
# sources and the harness copy
# --------------------------------------------------------------------------


def ensure_source(src: Path) -> Path:
    if not (src / "tests" / "test_helper.tcl").is_file():
        r = subprocess.run([str(HERE / "fetch-source.sh"), str(src.parent)])
        if r.returncode != 0 or not (src / "tests" / "test_helper.tcl").is_file():
            raise SuiteError(f"no Redis source tree at {src} (fetch-source.sh failed)")
    return src.resolve()


def source_version(src: Path) -> str:
    m = re.search(r'REDIS_VERSION "([^"]+)"', (src / "src" / "version.h").read_text())
    return m.group(1) if m else "unknown"


def make_harness(src: Path, work: Path) -> Path:
    """A scratch copy of runtest and tests/ with our patches applied."""
    h = work / "harness"
    shutil.rmtree(h, ignore_errors=True)
    h.mkdir(parents=True)
    shutil.copy2(src / "runtest", h / "runtest")
    shutil.copytree(src / "tests", h / "tests", ignore=shutil.ignore_patterns("tmp"))
    (h / "tests" / "tmp").mkdir()
    # introspection's command-line tests exec src/redis-server: the stock binary
    (h / "src").mkdir()
    exe = shutil.which("redis-server")
    if exe:
        (h / "src" / "redis-server").symlink_to(exe)
    for p in sorted((HERE / "patches").glob("*.patch")):
        r = subprocess.run(["patch", "-p1", "-s", "-d", str(h), "-i", str(p)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SuiteError(f"{p.name} does not apply: {(r.stdout + r.stderr).strip()}")
    return h


# --------------------------------------------------------------------------
# servers
# --------------------------------------------------------------------------


def _listening(host: str, port: int) -> bool:
    import socket

    try:
        with socket.create_connection((host, port), timeout=1.0) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class Server:
    kind: str
    host: str
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int | None:
        """SIGTERM and wait; the exit code (None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode


class Topology:
    """The DPDK stack's namespace and veth (pyctl netns up), made once per run."""

    NAME = "irsuite"

    def __init__(self) -> None:
        from pyctl import netns

        self.netns = netns
        if self.NAME in netns.namespaces():
            netns.down(self.NAME)
        self.t = netns.up(self.NAME, netns.free_subnet())

    def down(self) -> None:
        self.netns.down(self.NAME)


def dpdk_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "not root"
    if not _native.has_stack("dpdk"):
        return "libinreplay was built without DPDK"
    return None


def start_server(kind: str, work: Path, unit: str, topo: Topology | None) -> Server:
    port = free_port()
    host = HOST
    log = work / "logs" / f"{kind}-{unit.replace('/', '_')}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    pyctl = [sys.executable, "-m", "pyctl", "start"]
    if kind == "redis":
        exe = shutil.which("redis-server")
        if exe is None:
            raise SuiteError("redis-server is not installed (make deps installs it)")
        d = work / "redis-dir"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        argv = [exe, "--port", str(port), "--bind", HOST, "--dir", str(d), *REDIS_ARGS]
    elif kind == "kernel":
        argv = [*pyctl, "--listen", f"{HOST}:{port}", *OPENED]
    else:
        assert topo is not None
        t = topo.t
        host = t.appliance_ip
        argv = [*pyctl, "--stack", "dpdk", "--netns", t.netns, "--cores", "0",
                "--vdev", f"net_af_packet0,iface={t.iface}", "--ip", f"{host}/{t.prefix}",
                "--listen-port", str(port), "--mtu", str(t.mtu), "--hugepages", "256",
                "--file-prefix", Topology.NAME, *OPENED]
    with open(log, "wb") as f:
        proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=f,
                                stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    srv = Server(kind, host, port, proc, log)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if not srv.alive():
            tail = log.read_text(errors="replace").strip().splitlines()[-1:]
            raise SuiteError(f"{kind} server exited at start: {' '.join(tail)}")
        if _listening(host, port):
            return srv
        time.sleep(0.1)
    srv.stop()
    raise SuiteError(f"{kind} server did not answer PING within {START_TIMEOUT:.0f} s")


def _raw_client(srv: Server) -> Any:
    """redis-py on RESP2 that hands back replies as the server sent them."""
    import redis

    r = redis.Redis(host=srv.host, port=srv.port, protocol=2, socket_timeout=10)
    for cmd in ("INFO", "COMMAND"):
        r.set_response_callback(cmd, lambda resp, **_: resp)
    return r


def commandstats(srv: Server) -> dict[str, int]:
    """calls per command (and subcommand, 'config|set') from INFO commandstats."""

    with _raw_client(srv) as r:
        info = r.execute_command("INFO", "commandstats")
    text = info.decode() if isinstance(info, bytes) else str(info)
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^cmdstat_(\S+?):calls=(\d+)", text, re.M)}


def unknown_commands(srv: Server, names: list[str]) -> list[str]:
    """The commands of names that the server's COMMAND INFO does not know."""
    import redis

    with _raw_client(srv) as r:
        try:
            infos = r.execute_command("COMMAND", "INFO", *names)
        except redis.ResponseError:
            return list(names)
    return [n for n, i in zip(names, infos, strict=True) if not i]


# --------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------


def run_unit(harness: Path, srv: Server, unit: str, extra: list[str],
             timeout: float) -> tuple[UnitResult, str, float]:
    # The harness's own test-server port is found in [baseport-32, baseport) (and
    # +10000 must be free too); a range of our own keeps parallel runs apart.
    baseport = random.randrange(22000, 32000, 64) + 32
    argv = ["tclsh8.6" if shutil.which("tclsh8.6") else "tclsh", "tests/test_helper.tcl",
            "--host", srv.host, "--port", str(srv.port), "--single", unit,
            "--baseport", str(baseport), *HARNESS_FLAGS, *extra]
    env = {**os.environ, "TERM": "dumb"}
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=harness, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, env=env, start_new_session=True,
                         preexec_fn=die_with_parent)
    try:
        out, _ = p.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the harness and its test client
        out, _ = p.communicate()
        timed_out = True
    text = out.decode(errors="replace")
    res = parse_output(text)
    if timed_out:
        res.timeout = True
        res.exception = res.exception or f"the unit did not finish within {timeout:.0f} s"
    return res, text, time.monotonic() - t0


def compare(stock: dict[str, UnitResult], other: dict[str, UnitResult],
            skips: list[tuple[str, str]]) -> dict[str, Any]:
    """inreplay's passes over the tests stock passes (names counted with
    multiplicity: a few units run one test name several times)."""
    out: dict[str, Any] = {"units": {}}
    tot_stock = tot_pass = 0
    for unit, s in stock.items():
        o = other.get(unit)
        want = collections.Counter(s.passed)
        got = collections.Counter(o.passed if o else [])
        skipped = set(o.skipped) if o else set()
        passes = sum(min(c, got[n]) for n, c in want.items())
        missing = sorted((want - got).keys())
        no_reason = [n for n in missing if n in skipped and not _skip_reason(n, skips)]
        out["units"][unit] = {
            "stock_passed": sum(want.values()), "passed": passes,
            "ratio": round(passes / sum(want.values()), 4) if want else None,
            "not_passed": missing,
            "skipped_of_stock_passes": sorted(n for n in missing if n in skipped),
        }
        if no_reason:
            out["units"][unit]["skipped_without_reason"] = no_reason
        tot_stock += sum(want.values())
        tot_pass += passes
    out["stock_passed"] = tot_stock
    out["passed"] = tot_pass
    out["ratio"] = round(tot_pass / tot_stock, 4) if tot_stock else None
    return out


def _skip_reason(name: str, skips: list[tuple[str, str]]) -> str | None:
    for pat, reason in skips:
        if pat == name or (pat.startswith("/") and re.search(pat[1:], name)):
            return reason
    return None


def causes(results: dict[str, UnitResult], stock: dict[str, UnitResult]) -> list[list[Any]]:
    """The commonest reasons for failing a test stock passes."""
    c: collections.Counter[str] = collections.Counter()
    for unit, r in results.items():
        ok = set(stock[unit].passed) if unit in stock else None
        for name in r.failed:
            if ok is None or name in ok:
                c[cause_of(r.errors.get(name, ""))] += 1
        if r.exception:
            c["unit aborted: " + cause_of(r.exception)] += 1
        for e in r.block_errors:
            c["outside a test: " + cause_of(e)] += 1
    return [[k, n] for k, n in c.most_common(40)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", default=",".join(SERVERS),
                    help="comma-separated: redis (stock), kernel, dpdk (default all; dpdk "
                         "only where root and a DPDK build allow it)")
    ap.add_argument("--units", default=",".join(UNITS), help="comma-separated test units")
    ap.add_argument("--singledb", action="store_true",
                    help="the harness's --singledb: no SELECT 9, singledb:skip tests ignored")
    ap.add_argument("--only", action="append", default=[],
                    help="pass --only to runtest (a test name or /regex); repeatable")
    ap.add_argument("--tags", action="append", default=[],
                    help="pass --tags to runtest (e.g. -needs:repl to leave out the tests "
                         "that need replication); repeatable, applies to every server")
    ap.add_argument("--src", type=Path, default=ROOT / "build-deps" / "redis-src")
    ap.add_argument("--skiplist", type=Path, default=HERE / "skiplist.txt")
    ap.add_argument("--work", type=Path, default=ROOT / "build" / "redis-suite")
    ap.add_argument("--json", type=Path, default=ROOT / "build" / "redis-suite.json")
    ap.add_argument("--unit-timeout", type=float, default=900.0,
                    help="seconds one unit may take (default 900)")
    ap.add_argument("--keep-logs", action="store_true",
                    help="keep each unit's harness output in WORK/logs")
    a = ap.parse_args(argv)
    try:
        return _run(a)
    except SuiteError as e:
        print(f"redis-suite: {e}", file=sys.stderr)
        return 2


def _run(a: argparse.Namespace) -> int:
    servers = [s for s in a.servers.split(",") if s]
    servers.sort(key=lambda s: SERVERS.index(s) if s in SERVERS else -1)  # stock first
    units = [u for u in a.units.split(",") if u]
    for s in servers:
        if s not in SERVERS:
            raise SuiteError(f"--servers: unknown server '{s}' (redis, kernel, dpdk)")
    src = ensure_source(a.src)
    for u in units:
        if not (src / "tests" / f"{u}.tcl").is_file():
            raise SuiteError(f"--units: no {u}.tcl in {src}/tests")
    skips = read_skiplist(a.skiplist)
    a.work.mkdir(parents=True, exist_ok=True)
    harness = make_harness(src, a.work)
    skipfile = a.work / "skipfile"
    skipfile.write_text("".join(f"{n}\n" for n, _ in skips))
    common = (["--singledb"] if a.singledb else []) + [x for o in a.only for x in ("--only", o)] \
        + [x for t in a.tags for x in ("--tags", t)]

    summary: dict[str, Any] = {
        "redis_source": {"version": source_version(src), "path": str(src)},
        "harness_flags": HARNESS_FLAGS + common,
        "harness_patches": sorted(p.name for p in (HERE / "patches").glob("*.patch")),
        "skiplist_entries": len(skips),
        "units": units, "goal": GOAL, "servers": {},
    }
    results: dict[str, dict[str, UnitResult]] = {}
    # the commands the tests send stock redis-server (INFO commandstats), and
    # those of them an inreplay server does not know (COMMAND INFO)
    used: collections.Counter[str] = collections.Counter()
    used_sub: collections.Counter[str] = collections.Counter()
    unknown: dict[str, set[str]] = {}
    topo: Topology | None = None
    try:
        for kind in servers:
            if kind == "dpdk":
                why = dpdk_unavailable()
                if why is None:
                    try:
                        topo = Topology()
                    except (RuntimeError, OSError) as e:  # netns.SetupError is a RuntimeError
                        why = f"pyctl netns up failed: {e}"
                if why:
                    summary["servers"][kind] = {"unavailable": why}
                    print(f"{kind}: not run ({why})")
                    continue
            extra = list(common)
            if kind != "redis" and skips:
                extra += ["--skipfile", str(skipfile)]
            results[kind] = {}
            unknown[kind] = set()
            per_unit: dict[str, Any] = {}
            for unit in units:
                srv = start_server(kind, a.work, unit, topo)
                stats: dict[str, int] = {}
                try:
                    res, text, secs = run_unit(harness, srv, unit, extra, a.unit_timeout)
                    died = not srv.alive()
                    if kind == "redis" and not died:
                        stats = commandstats(srv)
                    if kind != "redis" and not died and used:
                        unknown[kind].update(unknown_commands(srv, sorted(used)))
                finally:
                    died = not srv.alive()
                    code = srv.stop()
                for cmd, calls in stats.items():
                    used[cmd.split("|")[0]] += calls
                    used_sub[cmd] += calls
                results[kind][unit] = res
                d = res.summary()
                d["seconds"] = round(secs, 1)
                if died:
                    d["server_died"] = f"exit code {code}; log {srv.log}"
                elif kind != "redis" and code != 0:
                    d["server_exit"] = code
                per_unit[unit] = d
                if a.keep_logs or res.exception or died:
                    out = a.work / "logs" / f"{kind}-{unit.replace('/', '_')}.out"
                    out.write_text(text)
                if not (a.keep_logs or died):
                    srv.log.unlink(missing_ok=True)
                print(f"{kind:6} {unit:22} passed {len(res.passed):3}  failed "
                      f"{len(res.failed):3}  skipped {len(res.skipped):3}  {secs:5.1f} s"
                      + ("  ABORTED" if res.exception else "")
                      + ("  SERVER DIED" if died else ""), flush=True)
            summary["servers"][kind] = {"units": per_unit}
    finally:
        if topo is not None:
            topo.down()

    stock = results.get("redis")
    for kind, res in results.items():
        if kind == "redis":
            continue
        entry = summary["servers"][kind]
        if stock is not None:
            entry["vs_stock"] = compare(stock, res, skips)
            entry["failure_causes"] = causes(res, stock)
            entry["unknown_commands"] = {c: used[c] for c in sorted(
                unknown.get(kind, ()), key=lambda c: -used[c])}
            v = entry["vs_stock"]
            print(f"{kind}: {v['passed']} of the {v['stock_passed']} tests stock redis-server "
                  f"passes ({100 * (v['ratio'] or 0):.1f}%)")
    if used_sub:
        summary["stock_commandstats"] = dict(used_sub.most_common())
    a.json.parent.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.NamedTemporaryFile("w", dir=a.json.parent, delete=False, suffix=".tmp")
    with tmp:
        json.dump(summary, tmp, indent=1)
    os.replace(tmp.name, a.json)
    print(f"summary: {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
