"""Run the C server in this process (through cffi), as a daemon, and find running ones.

Each running server leaves a state file ``<rundir>/<host>-<port>.json`` (pid, endpoint,
stack, start time, and the process's own start time and executable, by which ``pyctl
stop`` tells the server it started from whatever now has that pid); ``pyctl status``
and ``pyctl stop`` read these. A server that
fails as it stops (its final snapshot could not be written) leaves
``<rundir>/<host>-<port>.exit`` saying why, for ``pyctl stop`` to report. The run
directory is ``$INREPLAY_RUN_DIR`` or ``/tmp/inreplay-<uid>``, this user's own (mode
0700; one owned by another user, a symlink or one others may write is refused), and the
files in it are private (see pyctl.files); without ``--dir`` a server keeps its
snapshots in ``<rundir>/data/<host>-<port>``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import resource
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyctl import _native, config, files
from pyctl.config import ServerConfig


def rundir_path() -> Path:
    """Where the run directory is ($INREPLAY_RUN_DIR, else one per user in /tmp)."""
    return Path(os.environ.get(files.RUN_DIR_ENV, f"/tmp/inreplay-{os.getuid()}"))


def rundir() -> Path:
    """The run directory, created private; files.UnsafePathError if it is not this user's."""
    return files.private_dir(rundir_path())


class NotOurServerError(ValueError):
    """A state file names a process that is not the server pyctl started (the file is
    stale, its pid reused, or forged): nothing is signalled. One line."""


def process_start_time(pid: int) -> int | None:
    """When the process started, in clock ticks since boot (field 22 of /proc/<pid>/stat),
    or None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the fields after "(comm)" start at field 3; comm may itself hold ") "
    return int(stat.rpartition(")")[2].split()[22 - 3])


def process_exe(pid: int) -> str | None:
    """The executable the process runs, or None if that cannot be read."""
    try:
        return os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except OSError:
        return None


@dataclass
class Instance:
    """A server recorded in the run directory."""

    pid: int
    host: str
    port: int
    stack: str
    started: float
    path: Path
    cores: dict[str, str] | None = None
    netns: str = ""
    file_prefix: str = ""
    proc_start: int | None = None
    """The process's start time (process_start_time) when it wrote the file."""
    exe: str = ""
    """Its executable (process_exe) then."""
    server: str = "inreplay"
    """What serves: inreplay (the native server) or redis (stock redis-server with the
    REPLAY.* module, pyctl start --server redis)."""

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    def alive(self) -> bool:
        """True while the process runs; an exited daemon waiting to be reaped is not alive."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return True
        return stat.rpartition(")")[2].split()[0] not in ("Z", "X")

    def not_ours(self) -> str | None:
        """Why the process with this pid is not the server that wrote the state file, or
        None when it is (the same start time, and the same executable where it can be read)."""
        if self.proc_start is None:
            return "the file records no process start time"
        now = process_start_time(self.pid)
        if now is None:
            return None  # gone: there is nothing to signal
        if now != self.proc_start:
            return (f"that process started at tick {now}, the server at tick "
                    f"{self.proc_start}")
        exe = process_exe(self.pid)
        if self.exe and exe is not None and exe != self.exe:
            return f"that process runs {exe}, the server ran {self.exe}"
        return None

    def check_ours(self) -> None:
        """NotOurServerError unless this pid is still the server that wrote the file."""
        why = self.not_ours()
        if why:
            raise NotOurServerError(
                f"{self.path} names pid {self.pid}, which is not the server pyctl started "
                f"({why}): the file is stale or forged, so nothing was signalled; remove it")


def instances() -> list[Instance]:
    """Servers with a state file whose process still exists (stale files are removed)."""
    out = []
    for p in sorted(rundir().glob("*.json")):
        try:
            d = json.loads(p.read_text())
            start = d.get("proc_start")
            inst = Instance(int(d["pid"]), d["host"], int(d["port"]), d["stack"],
                            float(d["started"]), p, d.get("cores"), d.get("netns", ""),
                            d.get("file_prefix", ""),
                            int(start) if start is not None else None, str(d.get("exe") or ""),
                            str(d.get("server") or "inreplay"))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if inst.alive():
            out.append(inst)
        else:
            p.unlink(missing_ok=True)
    return out


def has_stack(name: str) -> bool:
    """This install's library has the network stack ``name`` ("kernel", "dpdk") compiled
    in; False when there is no library. What to ask before starting a server on it."""
    return _native.has_stack(name)


def core_roles(cfg: ServerConfig) -> dict[str, str] | None:
    """Which core does what (DPDK); None on the kernel stack, where the OS schedules."""
    if cfg.stack != "dpdk":
        return None
    cores = cfg.core_list()
    roles = {str(cores[0]): "network lcore: DPDK RX/TX, lwIP TCP/IP, RESP server, replay tables"}
    for c in cores[1:]:
        roles[str(c)] = "reserved, idle (one lwIP stack per process serves one queue)"
    return roles


def _to_c(cfg: ServerConfig, keep: list[Any]) -> Any:
    ffi, lib = _native.load()
    c = ffi.new("ir_config *")
    lib.ir_config_init(c)

    def s(v: str) -> Any:
        b = ffi.new("char[]", v.encode())
        keep.append(b)
        return b

    # every number the C table also has, into its ir_config member (see config.C_FIELDS)
    for f in dataclasses.fields(cfg):
        p = config.c_param(f.name)
        if p is not None and p["type"] not in ("string", "enum"):
            setattr(c, p["field"], int(v) if isinstance(v := getattr(cfg, f.name), bool) else v)
    c.stack = s(cfg.stack)
    c.bind = s(cfg.host)
    c.port = cfg.tcp_port
    if cfg.stack == "dpdk":
        c.eal_args = s(" ".join(cfg.eal_args()))
        c.ip = s(cfg.ip)
    if cfg.requirepass:
        c.requirepass = s(cfg.requirepass)
    if cfg.allowed_subnet():
        c.client_subnet = s(cfg.allowed_subnet())
    c.dir = s(cfg.dir)
    if cfg.aclfile:
        c.aclfile = s(cfg.aclfile)
    c.enable_debug_command = s(cfg.enable_debug_command)
    c.enable_protected_configs = s(cfg.enable_protected_configs)
    if cfg.unixsocket:
        c.unixsocket = s(cfg.unixsocket)
    if (shm := shm_socket_path(cfg)) is not None:
        c.shm_socket = s(shm)
    if cfg.appendfilename:
        c.appendfilename = s(cfg.appendfilename)
    if cfg.appenddirname:
        c.appenddirname = s(cfg.appenddirname)
    if cfg.shard_group:
        c.shard_group = s(",".join(cfg.group_members()))
    if cfg.restore or cfg.restore_if_present:
        c.restore = s(cfg.restore or cfg.restore_if_present)
        c.restore_if_present = int(bool(cfg.restore_if_present))
    c.save_on_shutdown = int(cfg.save_on_shutdown)
    if cfg.capacity > 0:
        c.table = s(cfg.table)
        c.table_capacity = cfg.capacity
        c.table_maxbytes = cfg.maxbytes
    keep.append(c)
    return c


def raise_fd_limit(maxclients: int) -> str | None:
    """Like Redis: make room for maxclients sockets plus some for ourselves.
    Returns a warning if the hard limit is too low, else None."""
    want = maxclients + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= want:
        return None
    for new_hard in (max(hard, want), hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, new_hard), new_hard))
            break
        except (ValueError, OSError):
            continue
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft < want:
        return (f"open files limit is {soft}: at most about {soft - 64} clients "
                f"(raise 'ulimit -n' or lower --maxclients)")
    return None


def _safe_host(host: str) -> str:
    return host.replace(":", "_").replace("/", "_") or "any"


def state_file(host: str, port: int) -> Path:
    """The record of the server at host:port: one per address, so two stacks on
    different addresses may share a port (a kernel and a DPDK appliance do)."""
    return rundir() / state_file_name(host, port)


def state_file_name(host: str, port: int) -> str:
    return f"{_safe_host(host)}-{port}.json"


def shm_socket_path(cfg: ServerConfig) -> str | None:
    """The shm socket a server started with cfg serves (None: none). auto: in the run
    directory (private to its owner, so only this user's clients take shared memory;
    the others stay on TCP), named after the address, or for port 0 after the process."""
    if cfg.shm_socket in ("", "none"):
        return None
    if cfg.shm_socket != "auto":
        return cfg.shm_socket
    name = f"{_safe_host(cfg.host)}-{cfg.tcp_port or f'0-{os.getpid()}'}.shm"
    path = str(rundir() / name)
    # a run directory too deep for a Unix socket path: auto means none, not a failed start
    return path if len(os.fsencode(path)) <= config.UNIX_PATH_MAX else None


def data_root() -> Path:
    """Where servers started without --dir keep their snapshots, one directory each."""
    return rundir() / "data"


def with_data_dir(cfg: ServerConfig) -> ServerConfig:
    """cfg with `dir` filled in: without --dir, <rundir>/data/<host>-<port> (created), or
    for port 0, whose number is not known yet, a new <host>-0-XXXX directory."""
    if cfg.dir:
        return cfg
    root = data_root()
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = f"{_safe_host(cfg.host)}-{cfg.tcp_port}"
    if cfg.tcp_port:
        d = root / name
        d.mkdir(exist_ok=True, mode=0o700)
    else:
        d = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root))
    return dataclasses.replace(cfg, dir=str(d))


def _exit_file(state: Path) -> Path:
    return state.with_suffix(".exit")


def exit_error(inst: Instance) -> str | None:
    """Why a server that has exited failed as it stopped (its snapshot on shutdown
    could not be written, ...), as it recorded; None when it stopped cleanly."""
    p = _exit_file(inst.path)
    try:
        d = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    if d.get("pid") != inst.pid:
        return None
    p.unlink(missing_ok=True)
    return str(d.get("error") or f"exited with error code {d.get('rc')}")


@contextlib.contextmanager
def stop_on_signals(lib: Any) -> Iterator[None]:
    """SIGINT and SIGTERM ask the server to stop (lib.ir_stop, which saves first with
    --save-on-shutdown): the library installs no handlers, signals are this process's.
    Python runs handlers on the main thread; elsewhere the caller must forward them."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, lambda *_: lib.ir_stop())
           for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def run(cfg: ServerConfig, ready: Any = None) -> int:
    """Run the server until it stops; returns 0 after a clean stop.

    The C loop runs on a worker thread (cffi releases the GIL) while this
    thread waits for it to listen, records the state file and calls
    ``ready(port)``. Raises an _native exception if the server cannot start.
    """
    ffi, lib = _native.load()
    cfg = with_data_dir(cfg)
    warning = raise_fd_limit(cfg.maxclients)
    if warning:
        print(f"inreplay: warning: {warning}", file=sys.stderr)
    keep: list[Any] = []
    ccfg = _to_c(cfg, keep)
    result: dict[str, Any] = {}

    def target() -> None:
        result["rc"] = lib.ir_run(ccfg)
        result["err"] = _native.last_error()  # thread-local in C: read it here
        result["errno"] = _native.last_errno()

    t = threading.Thread(target=target, name="inreplay-server", daemon=True)
    stats = ffi.new("ir_stats *")
    state: Path | None = None
    try:
        with stop_on_signals(lib):  # before the thread starts: no signal goes unanswered
            t.start()
            while t.is_alive():
                lib.ir_get_stats(stats)
                if stats.running and stats.port:
                    break
                t.join(0.005)
            if t.is_alive():
                port = stats.port
                state = state_file(cfg.host, port)
                _exit_file(state).unlink(missing_ok=True)
                files.write_private(state, json.dumps({
                    "pid": os.getpid(), "host": cfg.host, "port": port, "stack": cfg.stack,
                    "started": time.time(), "cores": core_roles(cfg), "netns": cfg.netns,
                    "file_prefix": cfg.file_prefix if cfg.stack == "dpdk" else "",
                    "proc_start": process_start_time(os.getpid()),
                    "exe": process_exe(os.getpid()) or "",
                    "shm_socket": shm_socket_path(cfg) or "",
                }))
                if ready:
                    ready(port)
            while t.is_alive():
                t.join(0.2)
    except KeyboardInterrupt:  # not on the main thread: Python's own SIGINT handling
        lib.ir_stop()
        t.join()
    finally:
        if state:
            rc = result.get("rc", 0)
            if rc < 0:  # for `pyctl stop`, which cannot see this process's exit status
                files.write_private(_exit_file(state), json.dumps({
                    "pid": os.getpid(), "rc": rc, "error": result.get("err") or "",
                    "errno": result.get("errno") or 0}))
            state.unlink(missing_ok=True)
        if Path(cfg.dir).parent == data_root():
            try:
                os.rmdir(cfg.dir)  # a default data directory nothing was saved in
            except OSError:
                pass
    return _native.check(result.get("rc", 0), result.get("err"), result.get("errno"))


def record_exec(host: str, port: int, binary: str) -> Path:
    """The state file of a server this process is about to become by execve (the
    redis-server host): the same pid and start time after the exec, and the executable
    as /proc shows it then, so that status and stop find it and stop checks it."""
    state = state_file(host, port)
    _exit_file(state).unlink(missing_ok=True)
    files.write_private(state, json.dumps({
        "pid": os.getpid(), "host": host, "port": port, "stack": "kernel",
        "started": time.time(), "cores": None, "netns": "", "file_prefix": "",
        "proc_start": process_start_time(os.getpid()), "exe": os.path.realpath(binary),
        "server": "redis",
    }))
    return state


def daemonize(cfg: ServerConfig) -> int:
    """Fork a daemon that runs the server; return its port once it listens.

    Errors in the child (a port in use, a bad stack) come back through a pipe
    and are raised here as the same exceptions. The log is opened here, before the
    fork (see files.open_log): a log pyctl will not write is a one-line ValueError.
    """
    log = cfg.logfile or str(state_file(cfg.host, cfg.tcp_port).with_suffix(".log"))
    try:
        fd = files.open_log(log)
    except OSError as e:
        raise ValueError(f"log {log}: {e.strerror or e}") from None
    except files.UnsafePathError as e:
        raise ValueError(f"log {e}") from None
    r, w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(fd)
        os.close(w)
        with os.fdopen(r) as pipe:
            line = pipe.readline().strip()
        if line.startswith("ok "):
            return int(line.split()[1])
        os.waitpid(pid, 0)
        try:
            err = json.loads(line)  # {"code", "errno", "message"} from the child below
        except ValueError:
            err = {}
        if not isinstance(err, dict):
            err = {}
        _, lib = _native.load()
        code, num = err.get("code"), err.get("errno")
        _native.check(code if isinstance(code, int) and code < 0 else lib.IR_ECONFIG,  # raises
                      str(err.get("message") or "the daemon exited before it was ready"),
                      num if isinstance(num, int) else 0)
        raise _native.InreplayError(lib.IR_ECONFIG, "the daemon exited before it was ready")
    # child
    os.close(r)
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    wpipe = os.fdopen(w, "w")

    def ready(port: int) -> None:
        wpipe.write(f"ok {port}\n")
        wpipe.close()

    code = 0
    try:
        run(cfg, ready)
    except _native.InreplayError as e:
        if not wpipe.closed:
            wpipe.write(json.dumps({"code": e.code, "errno": e.errno, "message": str(e)}) + "\n")
        print(f"inreplay: {e}", file=sys.stderr)
        code = 1
    except ValueError as e:
        if not wpipe.closed:
            wpipe.write(json.dumps({"code": -1, "errno": 0, "message": str(e)}) + "\n")
        code = 1
    finally:
        if not wpipe.closed:
            wpipe.close()
    os._exit(code)


def stop(inst: Instance, timeout: float = 10.0) -> bool:
    """SIGTERM a server and wait for it to exit; True if it did. NotOurServerError, and no
    signal, if the pid is no longer the server that wrote the state file."""
    try:
        # a pidfd is the process as it is now: checked, then signalled, it cannot be a
        # process that took the pid in between
        pidfd: int | None = os.pidfd_open(inst.pid)
    except ProcessLookupError:
        return True
    except OSError:  # a kernel without pidfds
        pidfd = None
    try:
        inst.check_ours()
        if pidfd is None:
            os.kill(inst.pid, signal.SIGTERM)
        else:
            signal.pidfd_send_signal(pidfd, signal.SIGTERM)
    except ProcessLookupError:
        return True
    finally:
        if pidfd is not None:
            os.close(pidfd)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not inst.alive():
            inst.path.unlink(missing_ok=True)
            return True
        time.sleep(0.05)
    return False
