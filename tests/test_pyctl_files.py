"""The control plane's files, secure by default: a private run directory (one another user
could have prepared is refused), private files created without following symlinks (pyctl's
state files and logs; the server's snapshots, AOF and ACL file and their temporary files),
`pyctl stop` signalling only the server it started, and passwords kept off command lines."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest import ServerProcess
from helpers import free_port

PYCTL = [sys.executable, "-m", "pyctl"]
VICTIM = "a file someone else cares about\n"
PASSWORD = "s3cret-not-for-ps"


@pytest.fixture
def rundir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """INREPLAY_RUN_DIR for this test (not created: pyctl creates it); servers still
    recorded there at the end are killed."""
    d = tmp_path / "run"
    monkeypatch.setenv("INREPLAY_RUN_DIR", str(d))
    yield d
    for f in d.glob("*.json") if d.is_dir() else []:  # through a symlink too
        try:
            os.kill(json.loads(f.read_text())["pid"], signal.SIGKILL)
        except (OSError, ValueError, KeyError):
            pass


def pyctl(*args: str, env: dict[str, str] | None = None,
          timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PYCTL, *args], capture_output=True, text=True, timeout=timeout,
                          check=False, env=env)


def one_line(r: subprocess.CompletedProcess[str]) -> str:
    """The failed command's stderr, which must be a single line."""
    assert r.returncode != 0, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def start_time(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot."""
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19])


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    v.write_text(VICTIM)
    return v


def start_daemon(port: int, *args: str) -> None:
    r = pyctl("start", "--daemon", "--listen", f"127.0.0.1:{port}", *args)
    assert r.returncode == 0, r.stderr


# ---- the server's files ---------------------------------------------------------------


@pytest.fixture
def inreplay(tmp_path: Path, rundir: Path) -> Iterator[Any]:
    """inreplay(name, *args): a native server with --dir tmp_path/name (made 0700)."""
    live: list[ServerProcess] = []

    def go(name: str, *args: str) -> ServerProcess:
        d = tmp_path / name
        d.mkdir(mode=0o700, exist_ok=True)
        s = ServerProcess("inreplay", d, ("--dir", str(d), *args))
        live.append(s)
        return s

    yield go
    for s in live:
        if s.alive():
            s.stop()


def _info(c: redis.Redis, key: str) -> str:
    return str(c.info("persistence")[key])


def _wait(c: redis.Redis, key: str) -> None:
    deadline = time.monotonic() + 20
    while _info(c, key) in ("1", "True"):
        assert time.monotonic() < deadline, f"{key} stayed on"
        time.sleep(0.02)


def test_snapshots_are_private(inreplay: Any, tmp_path: Path) -> None:
    s = inreplay("snap")
    c = s.client()
    c.set("k", "v")
    assert c.save()
    c.bgsave()
    _wait(c, "rdb_bgsave_in_progress")
    snaps = sorted((tmp_path / "snap").glob("inreplay-*.snap"))
    assert snaps and all(mode(p) == 0o600 for p in snaps)
    assert not list((tmp_path / "snap").glob(".*.tmp"))


@pytest.mark.parametrize("temp", ["temp-rewriteaof-bg-{pid}.aof", "temp-appendonly.aof.manifest"])
def test_aof_files_are_private_and_a_planted_temp_symlink_is_not_followed(
        inreplay: Any, tmp_path: Path, temp: str) -> None:
    s = inreplay("aof", "--appendonly")
    c = s.client()
    c.set("k", "v")
    aofdir = tmp_path / "aof" / "appendonlydir"
    v = victim(tmp_path)
    planted = aofdir / temp.format(pid=s.proc.pid)  # the server is the pyctl process
    planted.symlink_to(v)
    try:
        c.bgrewriteaof()
    except redis.ResponseError:
        pass  # the manifest's temporary file: refused at once
    _wait(c, "aof_rewrite_in_progress")
    assert v.read_text() == VICTIM, "the server wrote through a planted symlink"
    assert _info(c, "aof_last_bgrewrite_status") == "err" or planted.is_symlink()
    planted.unlink(missing_ok=True)
    c.set("k2", "v2")
    c.bgrewriteaof()
    _wait(c, "aof_rewrite_in_progress")
    assert _info(c, "aof_last_bgrewrite_status") == "ok"
    assert mode(aofdir) == 0o700
    names = sorted(p.name for p in aofdir.iterdir())
    assert any(".base." in n for n in names) and any(n.endswith(".manifest") for n in names)
    assert {n: mode(aofdir / n) for n in names} == dict.fromkeys(names, 0o600)
    assert all((aofdir / n).is_file() and not (aofdir / n).is_symlink() for n in names)
    assert v.read_text() == VICTIM


def test_acl_save_is_private_and_a_planted_temp_symlink_is_not_followed(
        inreplay: Any, tmp_path: Path) -> None:
    aclfile = tmp_path / "acl" / "users.acl"
    aclfile.parent.mkdir(mode=0o700)
    aclfile.write_text("")
    s = inreplay("acl", "--aclfile", str(aclfile))
    c = s.client()
    c.acl_setuser("alice", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all"])
    v = victim(tmp_path)
    planted = Path(f"{aclfile}.tmp-{s.proc.pid}")
    planted.symlink_to(v)
    with pytest.raises(redis.ResponseError, match="error trying to save the ACLs"):
        c.acl_save()
    assert v.read_text() == VICTIM
    planted.unlink(missing_ok=True)
    assert c.acl_save()
    assert not aclfile.is_symlink() and mode(aclfile) == 0o600
    assert "user alice on" in aclfile.read_text()


# ---- the run directory ----------------------------------------------------------------


def test_run_dir_and_pyctls_files_are_private(rundir: Path) -> None:
    port = free_port()
    start_daemon(port)
    try:
        assert mode(rundir) == 0o700
        state = rundir / f"127.0.0.1-{port}.json"
        log = rundir / f"127.0.0.1-{port}.log"
        assert mode(state) == 0o600 and mode(log) == 0o600
        assert mode(rundir / "data") == 0o700
        d = json.loads(state.read_text())
        assert d["proc_start"] == start_time(d["pid"])  # what stop checks
        assert d["exe"] == os.readlink(f"/proc/{d['pid']}/exe")
        assert [p.name for p in rundir.iterdir() if p.name.endswith(".tmp")] == []
    finally:
        r = pyctl("stop", "--listen", f"127.0.0.1:{port}")
    assert r.returncode == 0, r.stderr


def _other_owner(d: Path) -> None:
    d.mkdir()
    os.chown(d, 65534, 65534)


def _symlink(d: Path) -> None:
    real = d.with_name("elsewhere")
    real.mkdir(mode=0o700)
    d.symlink_to(real)


def _mode(m: int) -> Any:
    def make(d: Path) -> None:
        d.mkdir()
        os.chmod(d, m)
    return make


@pytest.mark.parametrize(("make", "says"), [
    pytest.param(_other_owner, "belongs to uid 65534", id="another-user",
                 marks=pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")),
    pytest.param(_symlink, "is a symlink", id="symlink"),
    pytest.param(_mode(0o777), "is writable by others (mode 0777)", id="world-writable"),
    pytest.param(_mode(0o770), "is writable by others (mode 0770)", id="group-writable"),
])
def test_a_run_dir_someone_else_could_have_prepared_is_refused(
        rundir: Path, make: Any, says: str) -> None:
    make(rundir)
    before = sorted(os.listdir(rundir))
    for args in (["start", "--daemon", "--listen", f"127.0.0.1:{free_port()}"],
                 ["status"], ["stop"]):
        line = one_line(pyctl(*args))
        assert line.startswith(f"pyctl {args[0]}: run directory {rundir} {says}"), line
        assert "INREPLAY_RUN_DIR" in line  # what to do instead
    assert sorted(os.listdir(rundir)) == before, "nothing was written there"


# ---- pyctl's own files ----------------------------------------------------------------


def test_a_symlink_at_the_state_files_path_is_replaced_not_followed(
        rundir: Path, tmp_path: Path) -> None:
    v = victim(tmp_path)
    rundir.mkdir(mode=0o700)
    port = free_port()
    state = rundir / f"127.0.0.1-{port}.json"
    state.symlink_to(v)
    start_daemon(port)
    try:
        assert v.read_text() == VICTIM
        assert not state.is_symlink() and mode(state) == 0o600
        assert json.loads(state.read_text())["port"] == port
    finally:
        r = pyctl("stop", "--listen", f"127.0.0.1:{port}")
    assert r.returncode == 0, r.stderr


def test_a_symlink_at_the_logs_path_is_refused(rundir: Path, tmp_path: Path) -> None:
    v = victim(tmp_path)
    rundir.mkdir(mode=0o700)
    port = free_port()
    (rundir / f"127.0.0.1-{port}.log").symlink_to(v)
    line = one_line(pyctl("start", "--daemon", "--listen", f"127.0.0.1:{port}"))
    assert "is a symlink" in line, line
    given = tmp_path / "given.log"
    given.symlink_to(v)
    r = pyctl("start", "--daemon", "--listen", f"127.0.0.1:{port}", "--logfile", str(given))
    assert r.returncode == 2 and one_line(r).startswith(f"pyctl start: --logfile {given}")
    assert v.read_text() == VICTIM
    assert not list(rundir.glob("*.json")), "no server started"


def test_a_new_logfile_is_private(rundir: Path, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    start_daemon(port, "--logfile", str(log))
    try:
        assert mode(log) == 0o600
    finally:
        r = pyctl("stop", "--listen", f"127.0.0.1:{port}")
    assert r.returncode == 0, r.stderr


# ---- pyctl stop signals only its own server -------------------------------------------


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    p = subprocess.Popen(["sleep", "60"])
    yield p
    p.kill()
    p.wait()


def _forge(rundir: Path, pid: int, port: int, **extra: Any) -> Path:
    rundir.mkdir(mode=0o700, exist_ok=True)
    f = rundir / f"127.0.0.1-{port}.json"
    f.write_text(json.dumps({"pid": pid, "host": "127.0.0.1", "port": port, "stack": "kernel",
                             "started": time.time(), **extra}))
    return f


@pytest.mark.parametrize("record", ["nothing", "another-start-time", "another-exe"])
@pytest.mark.parametrize("how", [[], ["--all"], ["--listen", "127.0.0.1:{port}"]])
def test_stop_does_not_signal_a_process_a_state_file_names_wrongly(
        rundir: Path, sleeper: subprocess.Popen[bytes], record: str, how: list[str]) -> None:
    port = free_port()
    start = start_time(sleeper.pid)
    extra = {"nothing": {},  # a file from no pyctl (forged), or from before it recorded these
             "another-start-time": {"proc_start": start + 1,
                                    "exe": os.readlink(f"/proc/{sleeper.pid}/exe")},
             "another-exe": {"proc_start": start, "exe": sys.executable}}[record]
    state = _forge(rundir, sleeper.pid, port, **extra)
    r = pyctl("stop", *(a.format(port=port) for a in how))
    line = one_line(r)
    assert r.returncode == 1
    assert line.startswith(f"pyctl stop: {state} names pid {sleeper.pid}, which is not the "
                           f"server pyctl started"), line
    assert "remove it" in line
    time.sleep(0.2)
    assert sleeper.poll() is None, "pyctl stop signalled an unrelated process"


def test_stop_still_stops_its_own_server_beside_a_forged_file(
        rundir: Path, sleeper: subprocess.Popen[bytes]) -> None:
    port = free_port()
    start_daemon(port)
    _forge(rundir, sleeper.pid, free_port())
    r = pyctl("stop", "--all")
    assert r.returncode == 1 and "which is not the server pyctl started" in one_line(r)
    assert "stopped pid" in r.stdout and f"127.0.0.1:{port}" in r.stdout
    assert sleeper.poll() is None
    assert not (rundir / f"127.0.0.1-{port}.json").exists()


# ---- passwords off the command line ---------------------------------------------------


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def _wait_auth(port: int, proc: subprocess.Popen[bytes]) -> redis.Redis:
    """A client authenticated with PASSWORD once the server answers (asserting that one
    without it is refused)."""
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, f"the server exited with {proc.returncode}"
        try:
            with pytest.raises(redis.AuthenticationError):
                redis.Redis(port=port, socket_timeout=5).ping()
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
    c = redis.Redis(port=port, password=PASSWORD, socket_timeout=5)
    assert c.ping()
    return c


@pytest.fixture
def foreground() -> Iterator[Any]:
    """foreground(*args, env=...): `pyctl start` running in the foreground; stopped at the end."""
    live: list[subprocess.Popen[bytes]] = []

    def go(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        p = subprocess.Popen([*PYCTL, "start", *args], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        live.append(p)
        return p

    yield go
    for p in live:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _password_file(tmp_path: Path) -> Path:
    f = tmp_path / "pass"
    fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, f"{PASSWORD}\n".encode())
    os.close(fd)
    return f


def test_requirepass_file_keeps_the_password_off_the_process_list(
        rundir: Path, tmp_path: Path, foreground: Any) -> None:
    port = free_port()
    p = foreground("--listen", f"127.0.0.1:{port}", "--requirepass-file",
                   str(_password_file(tmp_path)))
    _wait_auth(port, p)
    assert PASSWORD not in _cmdline(p.pid)  # the server runs in the pyctl process
    # and as a daemon: the forked server and the pyctl that started it
    port2 = free_port()
    start_daemon(port2, "--requirepass-file", str(tmp_path / "pass"))
    pid = json.loads((rundir / f"127.0.0.1-{port2}.json").read_text())["pid"]
    try:
        assert redis.Redis(port=port2, password=PASSWORD).ping()
        assert PASSWORD not in _cmdline(pid)
    finally:
        r = pyctl("stop", "--listen", f"127.0.0.1:{port2}")
    assert r.returncode == 0, r.stderr


def test_requirepass_from_the_environment(rundir: Path, foreground: Any) -> None:
    port = free_port()
    p = foreground("--listen", f"127.0.0.1:{port}",
                   env=dict(os.environ, INREPLAY_REQUIREPASS=PASSWORD))
    _wait_auth(port, p)
    assert PASSWORD not in _cmdline(p.pid)


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
def test_requirepass_file_with_the_redis_server(
        rundir: Path, tmp_path: Path, foreground: Any) -> None:
    """--server redis execs redis-server: the password reaches it on stdin, not argv."""
    port = free_port()
    p = foreground("--server", "redis", "--listen", f"127.0.0.1:{port}", "--requirepass-file",
                   str(_password_file(tmp_path)))
    c = _wait_auth(port, p)
    assert "redis-server" in _cmdline(p.pid) and PASSWORD not in _cmdline(p.pid)
    assert c.config_get("requirepass")["requirepass"] == PASSWORD


@pytest.mark.parametrize(("args", "says"), [
    (["--requirepass-file", "/nonexistent/pass"],
     "--requirepass-file /nonexistent/pass: No such file or directory"),
    (["--requirepass-file", "{empty}"], "the first line is empty"),
    (["--requirepass", "x", "--requirepass-file", "{pass}"], "the password is given twice"),
])
def test_requirepass_file_errors_are_one_line(rundir: Path, tmp_path: Path, args: list[str],
                                              says: str) -> None:
    (tmp_path / "empty").write_text("\n")
    files = {"empty": str(tmp_path / "empty"), "pass": str(_password_file(tmp_path))}
    r = pyctl("start", "--daemon", *(a.format(**files) for a in args))
    assert r.returncode == 2
    line = one_line(r)
    assert line.startswith("pyctl start: --requirepass-file") and says in line, line
