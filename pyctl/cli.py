"""pyctl: start, inspect and stop the inreplay appliance.

    pyctl start [--listen HOST:PORT] [--stack kernel|dpdk] [--capacity N] [--config FILE.toml]
                [--daemon] ...
    pyctl status [--listen HOST:PORT] [--json]
    pyctl stop [--listen HOST:PORT]

Every error is one line on stderr that names the flag or says what to do;
exit status 2 for usage errors, 1 for runtime failures.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import ipaddress
import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from pyctl import __version__, _native, files, netns
from pyctl import server as srv
from pyctl.config import (
    DEFAULT_HUGEPAGES,
    DPDK_ONLY,
    FLAG_GROUPS,
    REQUIREPASS_ENV,
    WILDCARD_HOSTS,
    ConfigError,
    ServerConfig,
    build,
    field_default,
    flag_specs,
    split_listen,
)
from pyctl.proc import free_ports


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: 'pyctl start: --port: ...'."""

    def error(self, message: str) -> NoReturn:
        message = message.replace("argument ", "")
        print(f"{self.prog}: {message} (see '{self.prog} --help')", file=sys.stderr)
        sys.exit(2)


def die(prog: str, msg: str, code: int = 1) -> NoReturn:
    print(f"{prog}: {msg}", file=sys.stderr)
    sys.exit(code)


def _listen(text: str) -> str:
    """--listen of status/stop/stats: HOST:PORT, :PORT or PORT (no host: any address)."""
    try:
        split_listen(text, default_host="")
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--listen: ")) from None
    return text


def _argtype(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type from a flag's parser: its ValueError becomes the one-line error."""
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    convert.__name__ = parse.__name__
    return convert


START_HELP = "run the appliance (foreground unless --daemon)"


def _add_start(sub: Any) -> Parser:
    """`pyctl start`'s options, one per ServerConfig field, made by config.flag_specs from the
    C parameter table (settings the C server has) and ServerConfig (pyctl's own): nothing
    about a setting is written here."""
    specs = flag_specs()  # before the subparser: without libinreplay there is none
    p: Parser = sub.add_parser("start", help=START_HELP)
    where = {None: p, **{k: p.add_argument_group(t) for k, t in FLAG_GROUPS.items()}}
    for spec in specs:
        kw: dict[str, Any] = {"default": None, "help": spec.help.replace("%", "%%")}
        if spec.action == "store_true":
            kw["action"] = "store_true"
        else:
            kw.update(action=spec.action, metavar=spec.metavar, choices=spec.choices,
                      type=_argtype(spec.parse) if spec.parse else None)
        where[spec.group].add_argument(spec.flag, **kw)
    p.add_argument("--config", metavar="FILE.toml",
                   help="read settings from a TOML file whose keys are the flags' names with _ "
                        "(listen = \"0.0.0.0:6379\"); flags override it")
    return p


def start_parser() -> Parser:
    """The `pyctl start` parser on its own (its options and help, for tests and docs)."""
    return _add_start(Parser(prog="pyctl").add_subparsers(parser_class=Parser))


DPDK_PCI_DRIVERS = ("vfio-pci", "igb_uio", "uio_pci_generic")


# pyctl start --server redis: the flags that mean something to redis-server with the module
REDIS_HOST_FLAGS = ("listen", "seed", "fanout", "maxbytes", "requirepass", "requirepass_file",
                    "maxmemory", "unixsocket", "unixsocketperm")


def redis_config_value(text: str) -> str:
    """``text`` as one double-quoted value of a redis.conf line (sdssplitargs reads it
    back): anything but printable ASCII, and the quote and backslash, as \\xHH."""
    return '"' + "".join(chr(b) if 0x20 <= b < 0x7f and b not in b'"\\' else f"\\x{b:02x}"
                         for b in text.encode()) + '"'


def _start_redis_host(prog: str, cfg: ServerConfig) -> int:
    """Exec Debian's redis-server with the REPLAY.* module, in the foreground."""
    default = ServerConfig()
    given = [f.name for f in dataclasses.fields(ServerConfig)
             if f.name not in (*REDIS_HOST_FLAGS, "server")
             and getattr(cfg, f.name) != getattr(default, f.name)]
    if given:
        only = ", ".join("--" + f.replace("_", "-") for f in REDIS_HOST_FLAGS)
        die(prog, f"--{given[0].replace('_', '-')} is the native server's: with --server redis "
                  f"only {only} apply", 2)
    try:
        module = _native.module_path()
    except _native.NativeLibraryMissingError as e:
        die(prog, str(e))
    import shutil

    binary = shutil.which("redis-server")
    if binary is None:
        die(prog, "--server redis needs redis-server (Debian: apt-get install redis-server)")
    host, port = split_listen(cfg.listen)
    # "-": redis-server reads configuration from stdin first, where the password goes, so
    # that its command line (the process list) does not show it
    argv = [binary, "-", "--port", str(port), "--bind", host, "--save", "", "--appendonly",
            "no"]
    if cfg.maxmemory:
        argv += ["--maxmemory", str(cfg.maxmemory)]
    if cfg.unixsocket:
        argv += ["--unixsocket", cfg.unixsocket, "--unixsocketperm", f"{cfg.unixsocketperm:o}"]
    argv += ["--loadmodule", str(module)]
    for name in ("seed", "fanout", "maxbytes"):
        if getattr(cfg, name) != getattr(default, name):
            argv += [name.upper(), str(getattr(cfg, name))]
    r, w = os.pipe()
    conf = f"requirepass {redis_config_value(cfg.requirepass)}\n" if cfg.requirepass else ""
    os.write(w, conf.encode())  # a line, far below a pipe's buffer
    os.close(w)
    os.dup2(r, 0)
    os.close(r)
    env = {k: v for k, v in os.environ.items() if k != REQUIREPASS_ENV}
    if port:  # pyctl status and stop find it as they find a native server
        srv.record_exec(host, port, binary)
    sys.stdout.flush()
    os.execve(binary, argv, env)
    return 1  # not reached


def cmd_start(args: argparse.Namespace) -> int:
    prog = "pyctl start"
    given = [k for k in DPDK_ONLY if getattr(args, k) is not None]
    if given and args.stack is None:
        args.stack = "dpdk"  # the design's start line: pyctl start --cores 2-5 --port 0
    elif given and args.stack == "kernel":
        die(prog, f"--{given[0].replace('_', '-')} is for the DPDK stack: drop --stack kernel", 2)
    if args.stack is not None:
        _require_stack(prog, args.stack)
    overrides = {f.name: getattr(args, f.name) for f in dataclasses.fields(ServerConfig)}
    try:
        cfg = build(args.config, overrides)
    except ConfigError as e:
        if args.stack == "dpdk":  # every problem at once, the host's too
            _dpdk_refused(prog, [*str(e).splitlines(),
                                 *_host_problems(build(args.config, overrides, validate=False))],
                          args)
        die(prog, str(e), 2)
    if cfg.server == "redis":
        return _start_redis_host(prog, cfg)
    _require_stack(prog, cfg.stack)  # a --config file's stack
    if cfg.stack == "dpdk" and args.listen:
        die(prog, "--listen is for the kernel stack; with --stack dpdk use --ip and --listen-port",
            2)
    if cfg.daemon and cfg.logfile:
        try:
            os.close(files.open_log(cfg.logfile))
        except OSError as e:
            die(prog, f"--logfile {cfg.logfile}: {e.strerror or e}", 2)
        except files.UnsafePathError as e:
            die(prog, f"--logfile {e}", 2)
    if cfg.netns and os.environ.get("INREPLAY_IN_NETNS") != cfg.netns:
        _reexec_in_netns(prog, cfg.netns, args.raw_argv)
    if cfg.stack == "dpdk":
        _check_dpdk_host(prog, cfg)
    for inst in srv.instances():
        if (inst.port == cfg.tcp_port and cfg.tcp_port != 0 and inst.host == cfg.host
                and not inst.not_ours()):  # a stale file's pid taken by another process
            flag = "--listen-port" if cfg.stack == "dpdk" else "--listen"
            die(prog, f"an inreplay server (pid {inst.pid}) already runs on {inst.endpoint}: "
                      f"'pyctl stop' it or choose another {flag} port")
    if cfg.shards > 1:
        return _start_group(prog, cfg)
    try:
        cfg = srv.with_data_dir(cfg)
        if cfg.daemon:
            port = srv.daemonize(cfg)
            print(f"inreplay: {cfg.stack} stack listening on {cfg.host}:{port} (daemon)")
            _print_unixsocket(cfg)
            print(f"inreplay: snapshot directory {Path(cfg.dir).resolve()}")
            return 0

        def ready(port: int) -> None:
            print(f"inreplay: {cfg.stack} stack listening on {cfg.host}:{port}")
            _print_unixsocket(cfg)
            print(f"inreplay: snapshot directory {Path(cfg.dir).resolve()}", flush=True)

        return srv.run(cfg, ready)
    except _native.NativeLibraryMissingError as e:
        die(prog, str(e))
    except _native.InreplayError as e:
        die(prog, f"{e}{_hint(e, cfg.stack)}")
    except ValueError as e:
        die(prog, str(e))


def _print_unixsocket(cfg: ServerConfig) -> None:
    """The start-up line for the Unix socket, when there is one (after the TCP one)."""
    if cfg.unixsocket:
        print(f"inreplay: and on the unix socket {cfg.unixsocket} (redis-cli -s "
              f"{cfg.unixsocket})")


def _require_stack(prog: str, stack: str) -> None:
    """One line and exit when the library was built without this stack."""
    if stack not in _native.stacks():
        die(prog, _native.missing_stack_hint(stack))


def _installed_stacks() -> list[str]:
    """The library's stacks, or none when there is no library to ask."""
    try:
        return list(_native.stacks())
    except _native.NativeLibraryMissingError:
        return []


def _stacks_line() -> str:
    """Which stacks this install has, from the library itself."""
    try:
        lib = _native.library_path()
        return f"stacks in this install: {', '.join(_native.stacks())} ({lib})"
    except _native.NativeLibraryMissingError as e:
        return f"stacks in this install: none ({e})"


def _start_group(prog: str, cfg: ServerConfig) -> int:
    """--shards N: N members on ports P..P+N-1 (N free ports for :0), member i pinned
    to core i mod the cores this process may use. With --daemon all run in the
    background; otherwise members 1..N-1 do and member 0 runs in the foreground,
    and stopping it stops the group."""
    allowed = sorted(os.sched_getaffinity(0))
    cores = allowed
    if cfg.stack == "dpdk":  # one process per lcore, each its own lwIP on --ip + i
        if "," in cfg.ip:
            ips = cfg.ip.split(",")
        else:
            iface = ipaddress.ip_interface(cfg.ip)
            ips = [f"{iface.ip + i}/{iface.network.prefixlen}" for i in range(cfg.shards)]
        lcores = cfg.core_list()
        group = ",".join(f"{ip.split('/')[0]}:{cfg.listen_port}" for ip in ips)
        members = [dataclasses.replace(
            cfg, shards=1, ip=ips[i], cores=str(lcores[i]), shard_group=group, shard_index=i,
            file_prefix=f"{cfg.file_prefix}-s{i}",
            logfile=f"{cfg.logfile}.{i}" if cfg.logfile else "") for i in range(cfg.shards)]
        cores = lcores  # EAL pins each member's lcore itself
    else:
        host, base = split_listen(cfg.listen)
        ports = (free_ports(host, cfg.shards) if base == 0
                 else list(range(base, base + cfg.shards)))
        if ports[-1] > 65535:
            die(prog, f"--shards {cfg.shards}: ports {base}-{ports[-1]} run past 65535", 2)
        shost = f"[{host}]" if ":" in host else host
        group = ",".join(f"{shost}:{p}" for p in ports)
        members = [dataclasses.replace(cfg, shards=1, listen=f"{shost}:{p}", shard_group=group,
                                       shard_index=i, logfile="" if not cfg.logfile
                                       else f"{cfg.logfile}.{i}")
                   for i, p in enumerate(ports)]
    # each member its own snapshot directory (and restores from its own)
    for i, m in enumerate(members):
        sub = {}
        for key in ("dir", "restore", "restore_if_present"):
            if getattr(cfg, key):
                sub[key] = str(Path(getattr(cfg, key)) / f"shard-{i}")
        if sub.get("dir"):
            Path(sub["dir"]).mkdir(parents=True, exist_ok=True)
        members[i] = dataclasses.replace(m, **sub)
    started: list[ServerConfig] = []
    background = members if cfg.daemon else members[1:]
    try:
        for m in background:
            os.sched_setaffinity(0, {cores[m.shard_index % len(cores)]})
            try:
                srv.daemonize(srv.with_data_dir(m))
            finally:
                os.sched_setaffinity(0, allowed)
            started.append(m)
    except (_native.InreplayError, ValueError) as e:
        for m in started:
            _stop_member(m)
        hint = _hint(e, cfg.stack) if isinstance(e, _native.InreplayError) else ""
        die(prog, f"shard {len(started)} ({group.split(',')[len(started)]}): {e}{hint}")
    for m in started:
        print(f"inreplay: shard {m.shard_index}/{cfg.shards} {cfg.stack} stack listening on "
              f"{m.host}:{m.tcp_port} (daemon, core {cores[m.shard_index % len(cores)]})")
    if cfg.daemon:
        print(f"inreplay: group {group}")
        return 0
    first = srv.with_data_dir(members[0])
    os.sched_setaffinity(0, {cores[0]})

    def ready(port: int) -> None:
        print(f"inreplay: shard 0/{cfg.shards} {cfg.stack} stack listening on {first.host}:{port} "
              f"(core {cores[0]})\ninreplay: group {group}", flush=True)

    try:
        return srv.run(first, ready)
    except _native.InreplayError as e:
        die(prog, f"shard 0 ({first.host}:{first.tcp_port}): {e}{_hint(e, cfg.stack)}")
    finally:
        for m in started:
            _stop_member(m)


def _stop_member(m: ServerConfig) -> None:
    for inst in srv.instances():
        if inst.port == m.tcp_port and inst.host == m.host:
            try:
                srv.stop(inst)
            except srv.NotOurServerError as e:
                print(f"pyctl start: {e}", file=sys.stderr)


def _reexec_in_netns(prog: str, name: str, argv: list[str]) -> NoReturn:
    """Run this same command inside network namespace `name`."""

    try:
        netns.require_root("--netns")
        if name not in netns.namespaces():
            die(prog, f"--netns {name}: no such namespace (create it with "
                      f"'pyctl netns up --name {name}')", 2)
    except netns.SetupError as e:
        die(prog, str(e), 2)
    env = dict(os.environ, INREPLAY_IN_NETNS=name)
    os.execvpe("ip", ["ip", "netns", "exec", name, sys.executable, "-m", "pyctl", *argv], env)


def _dpdk_pci_ports() -> list[str]:
    """PCI addresses of NICs bound to a driver DPDK can use (what its EAL probes)."""
    found: list[str] = []
    for drv in DPDK_PCI_DRIVERS:
        d = Path("/sys/bus/pci/drivers", drv)
        if d.is_dir():
            found += sorted(p.name for p in d.iterdir() if re.fullmatch(r"[0-9a-f:.]+", p.name))
    return found


def _working_line(args: argparse.Namespace) -> str:
    """A complete start line that works on this machine: the test topology's."""
    n = os.cpu_count() or 1
    t = netns.topology("inreplay", "10.77.0.0/24")
    port = args.listen_port or field_default("listen_port")
    sudo = "" if os.geteuid() == 0 else "sudo "  # root has no need of it, nor always has it
    return (f"{sudo}pyctl netns up && {sudo}"
            f"{t.start_line(port=port, cores='0' if n < 2 else '0-1')}"
            " (or bind a NIC: dpdk-devbind.py --bind=vfio-pci BUS:DEV.FN, then --port 0)")


def _dpdk_refused(prog: str, problems: list[str], args: argparse.Namespace) -> NoReturn:
    """Every problem at once, then a line that works here."""
    for p in problems:
        print(f"{prog}: {p}", file=sys.stderr)
    print(f"{prog}: a start line that works on this machine: {_working_line(args)}",
          file=sys.stderr)
    sys.exit(2)


def _check_dpdk_host(prog: str, cfg: ServerConfig) -> None:
    """Everything DPDK would otherwise report as a panic, a log flood or a wrong errno,
    checked before EAL starts; hugepages are reserved (and hugetlbfs mounted) as needed."""
    problems = _host_problems(cfg)
    if problems:
        _dpdk_refused(prog, problems, argparse.Namespace(listen_port=cfg.listen_port))
    try:
        netns.ensure_hugepages(cfg.hugepages or DEFAULT_HUGEPAGES)
    except netns.SetupError as e:
        die(prog, str(e))


def _host_problems(cfg: ServerConfig) -> list[str]:
    """What this machine lacks for cfg's DPDK stack (interfaces only once inside --netns)."""
    problems = []
    inside = not cfg.netns or os.environ.get("INREPLAY_IN_NETNS") == cfg.netns
    if os.geteuid() != 0:
        problems.append("the DPDK stack needs root (hugepages and raw NIC access): run it "
                        "with sudo")
    for v in cfg.vdev if inside else []:
        m = re.search(r"iface=([^,]+)", v)
        if m and not Path("/sys/class/net", m.group(1)).exists():
            where = f" in namespace {cfg.netns}" if cfg.netns else ""
            problems.append(f"--vdev {v}: interface {m.group(1)} does not exist{where} "
                            "('ip link' lists them; 'pyctl netns up' makes a test pair)")
    if not cfg.vdev:
        pci = _dpdk_pci_ports()
        if not pci:
            problems.append("no NIC is bound to a DPDK driver (dpdk-devbind.py --status lists "
                            "them; pyctl drivers lists the PMDs): bind one, or attach to a kernel "
                            "interface with --vdev net_af_packet0,iface=IFACE")
        if cfg.port >= max(len(pci), 1):
            tcp = (f"; for the TCP port use --listen-port {cfg.port}" if cfg.port >= 1024
                   else "")
            problems.append(f"--port {cfg.port}: DPDK port ids count the NICs bound to DPDK "
                            f"from 0, and this machine has {len(pci)}{tcp}")
    return problems


def _hint(e: _native.InreplayError, stack: str) -> str:
    """What to do about a start-up error, from its code and system error number (never
    from its text)."""
    _, lib = _native.load()
    if e.errno == errno.EADDRINUSE:
        return " (another server holds this port: stop it or choose another --listen port)"
    if stack == "dpdk" and e.errno == errno.EACCES:
        return (" (EAL could not map its hugepages: check that hugetlbfs is mounted and that "
                "free 2 MB hugepages are left: grep Huge /proc/meminfo)")
    if stack == "dpdk" and e.errno == errno.ENOMEM:
        return f" (not enough hugepages: start with --hugepages {2 * DEFAULT_HUGEPAGES})"
    if e.errno == errno.EACCES and e.code == lib.IR_ENET:
        return " (ports below 1024 need root: choose another --listen port)"
    return ""


def _pick(prog: str, listen: str | None) -> list[srv.Instance]:
    """Running servers; with --listen HOST:PORT the ones on that port and address (a
    server bound to every address matches any), so two stacks may share a port."""
    found = srv.instances()
    if listen:
        host, port = split_listen(listen, default_host="")
        found = [i for i in found if i.port == port
                 and (host in WILDCARD_HOSTS or i.host in WILDCARD_HOSTS or i.host == host)]
    return found


PASSWORD_ENV = "REDISCLI_AUTH"
"""The environment variable redis-cli reads its password from; status and stats read it too."""


def _connect(inst: srv.Instance, password: str | None, timeout: float) -> Any:
    import redis

    return redis.Redis(host=inst.host, port=inst.port, socket_timeout=timeout, protocol=2,
                       password=password or os.environ.get(PASSWORD_ENV) or None)


def _not_answering(inst: srv.Instance, e: Exception) -> str:
    """One line for a server that did not answer, with what to do where we can tell."""
    import redis

    text = str(e)
    if isinstance(e, redis.AuthenticationError) or "NOAUTH" in text or "Authentication" in text:
        hint = f" (give --password, or set {PASSWORD_ENV} as for redis-cli)"
    elif isinstance(e, redis.ConnectionError) and ("reset" in text or "closed" in text):
        hint = (" (protected mode closes connections from outside loopback and --client-subnet,"
                " and on DPDK every connection: start the server with --requirepass-file)")
    else:
        hint = ""
    return f"not answering on {inst.endpoint}: {text}{hint}"


def _status_of(inst: srv.Instance, password: str | None = None) -> dict[str, Any]:
    import redis

    from pyctl.errors import decode_info

    out: dict[str, Any] = {
        "running": True, "pid": inst.pid, "endpoint": inst.endpoint, "stack": inst.stack,
        "server": inst.server, "cores": inst.cores, "netns": inst.netns or None,
        "stacks": _installed_stacks(),
    }
    try:
        r = _connect(inst, password, 2)
        info = r.info("everything")
        out["uptime_s"] = info.get("uptime_in_seconds")
        out["stack_build"] = info.get("stack_build")
        out["event_loop"] = info.get("event_loop")
        out["lua"] = info.get("lua")
        out["shm_socket"] = info.get("shm_socket") or None
        out["shm_clients"] = info.get("connected_shm_clients")
        # not counting this connection
        out["clients"] = max(0, int(info.get("connected_clients", 1)) - 1)
        out["used_memory"] = info.get("used_memory")
        out["keys"] = r.dbsize()
        out["snapshots"] = {
            "dir": info.get("snapshot_dir"),
            "last_save_time": info.get("rdb_last_save_time"),
            "saves": info.get("rdb_saves"),
            "changes_since_last_save": info.get("rdb_changes_since_last_save"),
            "last_bgsave_status": info.get("rdb_last_bgsave_status"),
            "bgsave_in_progress": info.get("rdb_bgsave_in_progress"),
            "last_error": info.get("snapshot_last_error") or None,
        }
        tables = []
        for name in r.execute_command("REPLAY.LIST"):
            d = decode_info(r.execute_command("REPLAY.INFO", name))
            tables.append({"name": d["name"], "size": d["size"], "capacity": d["capacity"]})
        out["tables"] = tables
        raw = r.execute_command("REPLAY.SHARDS")
        group = dict(zip(raw[::2], raw[1::2], strict=True))
        members = [m.decode() for m in group[b"shards"]]
        if members:
            out["shard"] = {"index": int(group[b"index"]), "group": members}
        r.close()
    except redis.RedisError as e:
        out["error"] = _not_answering(inst, e)
    return out


def cmd_status(args: argparse.Namespace) -> int:
    found = _pick("pyctl status", args.listen)
    rows = [_status_of(i, args.password) for i in found]
    failed = 1 if any("error" in r for r in rows) else 0
    if args.json:
        if args.listen or len(rows) <= 1:
            print(json.dumps(rows[0] if rows else {"running": False, "stack": None,
                                                   "endpoint": args.listen, "cores": None,
                                                   "stacks": _installed_stacks()}))
        else:
            print(json.dumps(rows))
        return failed if rows else 3
    if not rows:
        print("inreplay: not running" + (f" on {args.listen}" if args.listen else ""))
        print(_stacks_line())
        return 3
    for r in rows:
        if "error" in r:
            print(f"inreplay pid {r['pid']} {r['endpoint']}: {r['error']}")
            continue
        tables = ", ".join(f"{t['name']} {t['size']}/{t['capacity']}" for t in r["tables"])
        tables = tables or "none"
        what = (f"{r['stack']} stack" if r.get("server") != "redis"
                else "redis-server with the REPLAY.* module")
        print(f"inreplay: running, pid {r['pid']}, {what} on {r['endpoint']}, "
              f"up {r['uptime_s']} s, {r['clients']} client(s), {r['keys']} key(s), "
              f"{r['used_memory'] / 2**20:.1f} MiB, tables: {tables}")
        if r.get("stack_build"):
            print(f"  stack: {r['stack_build']}; event loop: {r['event_loop']}")
        if r.get("lua"):
            print(f"  scripts run on: {r['lua']}")
        if r.get("shm_socket"):
            print(f"  same-host clients: shared memory at {r['shm_socket']} "
                  f"({r.get('shm_clients') or 0} connected)")
        if r.get("shard"):
            sh = r["shard"]
            print(f"  shard {sh['index']} of {len(sh['group'])}: group {','.join(sh['group'])}")
        if r.get("snapshots"):
            print(f"  snapshots: {_snapshot_line(r['snapshots'])}")
        for core, role in (r.get("cores") or {}).items():
            print(f"  core {core}: {role}")
    print(_stacks_line())
    return failed


def _snapshot_line(p: dict[str, Any]) -> str:
    """Where snapshots go and whether the last save worked, for `pyctl status`."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(p["last_save_time"] or 0))
    changes = p["changes_since_last_save"]
    if p["last_bgsave_status"] != "ok":
        line = (f"{p['dir']}; LAST SAVE FAILED: {p['last_error'] or 'see the log'} "
                f"({changes} change(s) since the last good save"
                f"{f' at {when}' if p['saves'] else ''} are not on disk)")
    elif p["saves"]:
        line = f"{p['dir']}; last saved {when}, {changes} change(s) since"
    else:
        line = f"{p['dir']}; nothing saved since start, {changes} change(s)"
    return line + ("; a background save is running" if p["bgsave_in_progress"] else "")


def cmd_stop(args: argparse.Namespace) -> int:
    prog = "pyctl stop"
    found = _pick(prog, args.listen)
    if not found:
        where = f" on {args.listen}" if args.listen else ""
        die(prog, f"no inreplay server is running{where}", 3)
    if args.all and not args.listen:  # a group on this box, or every server here
        refused = [i for i in found if i.not_ours()]
        found = [i for i in found if i not in refused]
        failed = [i for i in found if not srv.stop(i, args.timeout)]
        for i in found:
            if i not in failed:
                print(f"inreplay: stopped pid {i.pid} on {i.endpoint}")
        if refused:
            refused[0].check_ours()  # raises: the first one's reason, in one line
        if failed:
            die(prog, f"did not exit within {args.timeout} s: "
                      + ", ".join(f"pid {i.pid} on {i.endpoint}" for i in failed))
        return 0
    if len(found) > 1:
        ends = ", ".join(i.endpoint for i in found)
        die(prog, f"several servers run ({ends}): choose one with --listen, or --all", 2)
    inst = found[0]
    t0 = time.monotonic()
    if not srv.stop(inst, args.timeout):  # NotOurServerError: see main
        die(prog, f"pid {inst.pid} did not exit within {args.timeout} s")
    failed = srv.exit_error(inst)
    if failed:
        die(prog, f"pid {inst.pid} on {inst.endpoint} stopped with an error: {failed}")
    print(f"inreplay: stopped pid {inst.pid} on {inst.endpoint} "
          f"in {time.monotonic() - t0:.2f} s")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Counters from INFO (both stacks) and DPDK telemetry (the DPDK stack)."""
    import redis

    from pyctl import telemetry
    from pyctl.errors import decode_info

    prog = "pyctl stats"
    found = _pick(prog, args.listen)
    if not found:
        die(prog, "no inreplay server is running", 3)
    if len(found) > 1:
        die(prog, "several servers run: choose one with --listen", 2)
    inst = found[0]
    try:
        r = _connect(inst, args.password, 5)
        before = r.info("stats")["total_commands_processed"]
        time.sleep(args.interval)
        info = r.info("everything")
        tables = {}
        for name in r.execute_command("REPLAY.LIST"):
            d = decode_info(r.execute_command("REPLAY.INFO", name))
            tables[d["name"]] = {k: d[k] for k in ("size", "capacity", "inserts", "samples",
                                                   "updates", "stale_updates", "bytes_used")}
        r.close()
    except redis.RedisError as e:
        die(prog, _not_answering(inst, e))
    # the INFO call itself is one command: leave it out of the rate
    cps = (info["total_commands_processed"] - before - 1) / args.interval
    out: dict[str, Any] = {
        "endpoint": inst.endpoint, "stack": inst.stack, "clients": info["connected_clients"],
        "commands_per_sec": round(max(cps, 0.0), 1), "used_memory": info["used_memory"],
        "keys": info.get("db0", {}).get("keys", 0), "tables": tables,
        "ports": None,
    }
    if inst.stack == "dpdk" and inst.file_prefix:
        try:
            t = telemetry.query(inst.file_prefix, "/inreplay/stats")["/inreplay/stats"]
            out["ports"] = {str(t["port_id"]): {k: t[k] for k in (
                "link_up", "rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "imissed",
                "ierrors", "oerrors", "rx_nombuf", "rx_martians")}}
            out["connections"] = t["connections"]
        except (telemetry.TelemetryError, KeyError, TypeError) as e:
            out["ports_error"] = str(e)
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{inst.endpoint} ({inst.stack}): {out['clients']} client(s), "
          f"{out['commands_per_sec']:.0f} commands/s, {out['keys']} key(s), "
          f"{out['used_memory'] / 2**20:.1f} MiB")
    for pid, p in (out["ports"] or {}).items():
        print(f"  port {pid}: link {'up' if p['link_up'] else 'DOWN'}, rx {p['rx_packets']} pkts "
              f"/ {p['rx_bytes']} B, tx {p['tx_packets']} pkts / {p['tx_bytes']} B, "
              f"imissed {p['imissed']}, rx_nombuf {p['rx_nombuf']}, errors "
              f"{p['ierrors']}/{p['oerrors']}, martians dropped {p['rx_martians']}")
    if "ports_error" in out:
        print(f"  ports: {out['ports_error']}")
    for name, t in tables.items():
        print(f"  table {name}: {t['size']}/{t['capacity']} items, {t['inserts']} inserts, "
              f"{t['samples']} samples, {t['updates']} updates ({t['stale_updates']} stale)")
    return 0


def cmd_drivers(args: argparse.Namespace) -> int:
    from pyctl.drivers import list_drivers, pmd_dirs

    if not args.json:
        print(_stacks_line())
        if "dpdk" not in _installed_stacks():
            print(f"  {_native.missing_stack_hint('dpdk')}")
    dirs = pmd_dirs()
    if not dirs:
        die("pyctl drivers", "no DPDK PMD directory found: install Debian's 'dpdk' package")
    found = [d for d in list_drivers(dirs) if args.all or d.kind == "net"]
    if args.json:
        print(json.dumps([{"name": d.name, "kind": d.kind, "library": d.library,
                           "params": split_params(d.params), "kmod": d.kmod,
                           "pci_ids": len(d.pci_ids)}
                          for d in found], indent=1))
        return 0
    print(f"{len(found)} {'poll-mode' if args.all else 'network poll-mode'} drivers "
          f"in {', '.join(str(d) for d in dirs)}")
    for d in found:
        where = f"{len(d.pci_ids)} PCI ids" if d.pci_ids else "virtual (--vdev)"
        extra = f" [{d.kmod}]" if d.kmod else ""
        params = ", ".join(split_params(d.params))
        print(f"  {d.name:22} {d.kind:8} {where:18}{extra}  {params}".rstrip())
    return 0


_PARAM_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def split_params(text: str) -> list[str]:
    """A PMD's parameter string as a list: DPDK concatenates each driver's
    RTE_PMD_REGISTER_PARAM_STRING pieces, some without a space between them
    ("selftest=1ipsec_in_min_spi=<1-U32_MAX>"): a new parameter starts at every
    NAME= outside <...>."""
    starts, depth = [], 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0 and (i == 0 or not (text[i - 1].isalpha() or text[i - 1] == "_")):
            m = _PARAM_KEY.match(text, i)
            if m:
                starts.append(i)
    if not starts:
        return [text.strip()] if text.strip() else []
    bounds = [*starts[1:], len(text)]
    head = text[:starts[0]].strip()
    return ([head] if head else []) + [text[a:b].strip() for a, b in zip(starts, bounds,
                                                                          strict=True)]


def _bridge_counters(stats: dict[str, object]) -> str:
    parts = []
    for way, label in (("ab", "towards the appliance"), ("ba", "from the appliance")):
        c = stats.get(way)
        if isinstance(c, dict):
            parts.append(f"{label}: " + ", ".join(
                f"{c.get(k, 0)} {k}" for k in ("received", "forwarded", "dropped", "delayed",
                                                "reordered", "duplicated", "overflow")))
    return "; ".join(parts)


def cmd_netns(args: argparse.Namespace) -> int:

    prog = f"pyctl netns {args.action}"
    try:
        if args.action == "up":
            t = netns.up(args.name, args.subnet, args.mtu, impair=args.impair,
                         impair_seed=args.impair_seed)
            if args.json:
                print(json.dumps(t.to_json()))
            else:
                print(f"namespace {t.netns}: appliance side {t.iface} (lwIP answers on "
                      f"{t.appliance_ip}/{t.prefix}, kernel servers on {t.kernel_ip}), "
                      f"client side {t.peer} {t.client_ip}/{t.prefix}, MTU {t.mtu}, offloads off")
                if t.impair:
                    b = t.impair
                    print(f"impairment bridge in namespace {b['netns']} ({b['a']} <-> {b['b']}), "
                          f"pid {b['pid']}: {b['spec'] or 'no impairment'} (seed {b['seed']})")
                print("start the appliance with:")
                print(f"  {t.start_line()}")
        elif args.action == "impair":
            if args.impair is not None:
                netns.set_impair(args.name, args.impair)
            if args.burst:
                netns.burst(args.name)
            stats = netns.bridge_stats(args.name)
            print(json.dumps(stats) if args.json else _bridge_counters(stats))
        else:
            existed, stats = netns.down_with_stats(args.name)
            if args.json:
                print(json.dumps({"netns": args.name, "removed": existed, "bridge": stats}))
            else:
                print(f"namespace {args.name} {'removed' if existed else 'was not there'}")
                if stats:
                    print(f"impairment bridge: {_bridge_counters(stats)}")
    except netns.SetupError as e:
        die(prog, str(e))
    return 0


def cmd_module_path(args: argparse.Namespace) -> int:
    try:
        print(_native.module_path())
    except _native.NativeLibraryMissingError as e:
        die("pyctl module-path", str(e))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="pyctl", description="Control plane of the inreplay replay appliance.")
    p.add_argument("--version", action="version", version=f"pyctl {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=Parser)
    raw = list(sys.argv[1:] if argv is None else argv)
    try:
        _add_start(sub)
    except _native.NativeLibraryMissingError as e:  # start's defaults are the library's
        if raw[:1] == ["start"]:
            die("pyctl start", str(e))
        sub.add_parser("start", help=START_HELP)
    s = sub.add_parser("status", help="is a server running, and what does it hold")
    s.add_argument("--listen", type=_listen, help="HOST:PORT of the server to ask about")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.add_argument("--password", help=f"the server's requirepass (default: ${PASSWORD_ENV})")
    st = sub.add_parser("stop", help="stop a running server (SIGTERM)")
    st.add_argument("--listen", type=_listen, help="HOST:PORT of the server to stop")
    st.add_argument("--timeout", type=float, default=10.0, help="seconds to wait (default 10)")
    st.add_argument("--all", action="store_true",
                    help="stop every server on this box (a whole group started with --shards)")
    sa = sub.add_parser("stats", help="counters: clients, commands/s, tables, DPDK ports")
    sa.add_argument("--listen", type=_listen, help="HOST:PORT of the server")
    sa.add_argument("--interval", type=float, default=1.0, help="seconds for commands/s (1)")
    sa.add_argument("--json", action="store_true", help="machine-readable output")
    sa.add_argument("--password", help=f"the server's requirepass (default: ${PASSWORD_ENV})")
    dr = sub.add_parser("drivers", help="poll-mode drivers the DPDK stack can use")
    dr.add_argument("--all", action="store_true", help="every PMD kind, not only network ones")
    dr.add_argument("--json", action="store_true", help="machine-readable output")
    ns = sub.add_parser("netns", help="the namespace + veth test topology for the DPDK stack")
    ns.add_argument("action", choices=["up", "down", "impair"],
                    help="impair: change a running impairment bridge (--impair, --burst) "
                         "and print its counters")
    ns.add_argument("--name", default="inreplay", help="namespace name (default inreplay)")
    ns.add_argument("--subnet", default="10.77.0.0/24", help="addresses (default 10.77.0.0/24)")
    ns.add_argument("--mtu", type=int, default=netns.DEFAULT_MTU,
                    help=f"veth MTU (default {netns.DEFAULT_MTU}, jumbo frames; 1500 classic)")
    ns.add_argument("--json", action="store_true", help="print the topology as JSON")
    ns.add_argument("--impair", metavar="SPEC",
                    help="put an impairment bridge on the path (namespace NAME-br), e.g. "
                         "loss=5%%,delay=20ms±5ms,reorder=25%%,duplicate=1%%,burst=30%%/2s; "
                         "prefix in./out. for one direction")
    ns.add_argument("--impair-seed", type=int, default=1,
                    help="the bridge's random seed (default 1: the same decisions every run)")
    ns.add_argument("--burst", action="store_true",
                    help="with 'impair': start a loss burst (the spec's burst=P%%/Ts)")
    sub.add_parser("module-path", help="print the built REPLAY.* module's absolute path "
                   "(redis-server --loadmodule \"$(pyctl module-path)\")")
    sub.add_parser("demo", help="train an agent through the appliance: Ape-X, or --algo "
                   "impala|r2d2|a3c (see pyctl demo -h)",
                   add_help=False)
    sub.add_parser("export-minari", add_help=False,
                   help="drain a recording table into a Minari dataset (see pyctl "
                        "export-minari -h; the [offline] extra)")
    if raw[:1] == ["export-minari"]:  # minari is imported there, not by the control plane
        os.execv(sys.executable, [sys.executable, "-m", "pyctl.minari_export", *raw[1:]])
    if raw[:1] == ["demo"]:
        # The demo is RL code (actors.demo: actors, learner, evaluation) with flags of
        # its own; the control plane imports none of it, it hands the process over.
        argv_demo = [sys.executable, "-m", "inreplay.actors.demo", *raw[1:]]
        os.execv(sys.executable, argv_demo)
    args = p.parse_args(argv)
    args.raw_argv = list(sys.argv[1:] if argv is None else argv)
    handlers = {"start": cmd_start, "status": cmd_status, "stop": cmd_stop,
                "drivers": cmd_drivers, "netns": cmd_netns, "stats": cmd_stats,
                "module-path": cmd_module_path}
    try:
        return handlers[args.cmd](args)
    except (files.UnsafePathError, srv.NotOurServerError) as e:  # the run directory's files
        die(f"pyctl {args.cmd}", str(e))
    except BrokenPipeError:
        # `pyctl drivers | head`: the reader left; end quietly, as cat does (exit 141
        # = 128 + SIGPIPE), with stdout pointed at /dev/null so the flush at exit is quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13


if __name__ == "__main__":
    sys.exit(main())
