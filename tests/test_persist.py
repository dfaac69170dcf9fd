"""Nothing lost silently: the snapshot directory, failed saves on
shutdown, BGSAVE failures, SHUTDOWN NOSAVE|SAVE|ABORT|FORCE and --restore.

Every test runs real servers (``python -m pyctl start``, and stock redis-server
where Redis has the same behaviour, side by side) in a run directory of its own.
A save is made to fail the way it fails in the field, and the way that works for
root too: the snapshot directory disappears under the running server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import redis
from helpers import free_port

if TYPE_CHECKING:
    from conftest import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
PYCTL = [sys.executable, "-m", "pyctl"]
Factory = Callable[..., "ServerProcess"]
UNWRITABLE = "/proc/1"  # a directory no file can be created in, root or not


@pytest.fixture(autouse=True)
def rundir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private run directory: servers started here record themselves (and keep their
    default data directories) in it, so pyctl status/stop see only this test's."""
    d = tmp_path / "run"
    monkeypatch.setenv("INREPLAY_RUN_DIR", str(d))
    return d


def pyctl(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PYCTL, *args], capture_output=True, text=True, timeout=timeout,
                          check=False, cwd=ROOT)


def made(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    return d


def snaps(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.name.startswith("inreplay-") and p.suffix == ".snap")


def info(r: redis.Redis) -> dict[str, Any]:
    return dict(r.info("persistence"))


def reply(c: Any, *args: str) -> Any:
    """A raw reply, errors as text, so that both servers' answers compare as they are."""
    v = c.call(*args)
    return v.message.decode() if hasattr(v, "message") else v


def wait_bgsave(r: redis.Redis) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        p = info(r)
        if p["rdb_bgsave_in_progress"] == 0:
            return p
        time.sleep(0.02)
    raise AssertionError("BGSAVE did not finish")


def start_args(kind: str, d: Path, save: bool) -> list[str]:
    """The same settings on both servers: snapshots in d, saving on shutdown or not."""
    if kind == "redis":
        return ["--dir", str(d), "--enable-protected-configs", "yes",
                *(["--save", "3600 1"] if save else [])]
    return ["--dir", str(d), *(["--save-on-shutdown"] if save else [])]


# ---- the snapshot directory --------------------------------------------------


def test_default_dir_is_a_data_dir_under_the_run_dir(server_factory: Factory, rundir: Path
                                                     ) -> None:
    before = set(ROOT.glob("inreplay-*.snap"))
    a = server_factory("inreplay")
    want = rundir / "data" / f"127.0.0.1-{a.port}"
    line = f"inreplay: snapshot directory {want}"
    deadline = time.monotonic() + 10  # pyctl prints it from its ready callback, which may
    while line not in a.log_tail() and time.monotonic() < deadline:  # follow the first PONG
        time.sleep(0.05)
    assert line in a.log_tail()
    r = a.client()
    assert r.config_get("dir") == {"dir": str(want)}
    assert info(r)["snapshot_dir"] == str(want)
    r.set("k", "v")
    assert r.save() is True
    assert len(snaps(want)) == 1
    assert set(ROOT.glob("inreplay-*.snap")) == before  # not where pyctl happened to run
    assert a.stop() == 0
    assert len(snaps(want)) == 1  # kept: it holds a snapshot
    b = server_factory("inreplay")
    unused = rundir / "data" / f"127.0.0.1-{b.port}"
    assert unused.is_dir()
    assert b.stop() == 0
    assert not unused.exists()  # nothing was saved in it: removed at exit


@pytest.mark.parametrize("what", ["missing", "file", "unwritable"])
def test_start_refuses_an_unusable_dir(what: str, tmp_path: Path) -> None:
    bad = {"missing": tmp_path / "nonexistent", "unwritable": Path(UNWRITABLE),
           "file": tmp_path / "afile"}[what]
    if what == "file":
        bad.write_text("x")
    reason = {"missing": "No such file or directory", "file": "Not a directory",
              "unwritable": "cannot create files in it"}[what]
    port = free_port()
    for mode in ([], ["--daemon"]):
        r = pyctl("start", "--listen", f"127.0.0.1:{port}", "--dir", str(bad), *mode)
        assert r.returncode == 1, r
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert lines[0].startswith(f"pyctl start: snapshot directory (--dir) {bad}: {reason}")
        assert "Traceback" not in r.stderr and "listening" not in r.stdout
    assert pyctl("status", "--listen", f"127.0.0.1:{port}").returncode == 3
    if what != "unwritable":  # stock Redis refuses the same directories, for the same reason
        out = subprocess.run(["redis-server", "--port", "0", "--dir", str(bad)],
                             capture_output=True, text=True, timeout=10, check=False)
        assert out.returncode != 0 and reason in out.stdout + out.stderr


def test_config_set_dir_like_redis(server_factory: Factory, tmp_path: Path) -> None:
    base = made(tmp_path / "base")
    made(base / "sub")
    (tmp_path / "afile").write_text("x")
    answers = {}
    for kind in ("redis", "inreplay"):
        srv = server_factory(kind, *start_args(kind, base, save=False))
        with srv.raw() as c:
            answers[kind] = [
                reply(c, "CONFIG", "SET", "dir", str(base)),
                reply(c, "CONFIG", "SET", "dir", "sub"),  # relative to the current one
                reply(c, "CONFIG", "GET", "dir"),
                reply(c, "CONFIG", "SET", "dir", str(tmp_path / "nonexistent")),
                reply(c, "CONFIG", "SET", "dir", str(tmp_path / "afile")),
                reply(c, "CONFIG", "SET", "dir", "missing-relative"),
                reply(c, "CONFIG", "SET", "dir", ""),
                reply(c, "CONFIG", "GET", "dir"),  # unchanged by the failures
            ]
    assert answers["inreplay"] == answers["redis"]
    assert answers["redis"][2] == [b"dir", str(base / "sub").encode()]
    assert answers["redis"][3] == ("ERR CONFIG SET failed (possibly related to argument 'dir') "
                                   "- No such file or directory")
    assert answers["redis"][4].endswith("- Not a directory")


def test_config_set_dir_refuses_an_unwritable_dir(server_factory: Factory, tmp_path: Path
                                                  ) -> None:
    d = made(tmp_path / "d")
    srv = server_factory("inreplay", "--dir", str(d))
    r = srv.client()
    with pytest.raises(redis.ResponseError, match=r"^CONFIG SET failed \(possibly related to "
                       r"argument 'dir'\) - cannot create files in it: "):
        r.config_set("dir", UNWRITABLE)
    assert r.config_get("dir") == {"dir": str(d)}
    assert r.save() is True and len(snaps(d)) == 1  # still saves where it did


# ---- SHUTDOWN ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["redis", "inreplay"])
def test_shutdown_flags_like_redis(kind: str, server_factory: Factory, tmp_path: Path) -> None:
    d = made(tmp_path / kind)
    srv = server_factory(kind, *start_args(kind, d, save=True))
    with srv.raw() as c:
        assert reply(c, "SET", "k", "v") == "OK"
        assert reply(c, "SHUTDOWN", "ABORT") == "ERR No shutdown in progress."
        for bad in (["ABORT", "NOSAVE"], ["NOW", "ABORT"], ["SAVE", "NOSAVE"], ["BOGUS"]):
            assert reply(c, "SHUTDOWN", *bad) == "ERR syntax error", bad
        assert reply(c, "PING") == "PONG"
        c.send(c.command("SHUTDOWN", "NOSAVE"))  # although saving on shutdown is on
        c.expect_close(timeout=10)
    assert srv.wait(15) == 0, srv.log_tail()
    assert [p.name for p in d.iterdir()] == []


@pytest.mark.parametrize("kind", ["redis", "inreplay"])
def test_shutdown_save_failure_answers_and_keeps_running(kind: str, server_factory: Factory,
                                                         tmp_path: Path) -> None:
    d = made(tmp_path / "d")
    srv = server_factory(kind, *start_args(kind, d, save=True))
    with srv.raw() as c:
        assert reply(c, "SET", "k", "v") == "OK"
        d.rmdir()
        for args in ([], ["SAVE"], ["NOW"]):
            assert reply(c, "SHUTDOWN", *args) == "ERR Errors trying to SHUTDOWN. Check logs."
        assert reply(c, "GET", "k") == b"v" and srv.alive()
        made(d)
        assert reply(c, "CONFIG", "SET", "dir", str(d)) == "OK"
        c.send(c.command("SHUTDOWN", "SAVE"))
        c.expect_close(timeout=10)
    assert srv.wait(15) == 0, srv.log_tail()
    assert [p.name for p in d.iterdir()] == (["dump.rdb"] if kind == "redis" else
                                             [p.name for p in snaps(d)])
    assert len(list(d.iterdir())) == 1


@pytest.mark.parametrize("kind", ["redis", "inreplay"])
def test_shutdown_save_force_exits_despite_the_failure(kind: str, server_factory: Factory,
                                                       tmp_path: Path) -> None:
    d = made(tmp_path / "d")
    srv = server_factory(kind, *start_args(kind, d, save=True))
    with srv.raw() as c:
        d.rmdir()
        c.send(c.command("SHUTDOWN", "SAVE", "FORCE"))
        c.expect_close(timeout=10)
    assert srv.wait(15) == 0, srv.log_tail()


def test_shutdown_abort_cancels_a_signals_shutdown(server_factory: Factory, tmp_path: Path
                                                   ) -> None:
    """SIGTERM asks for a shutdown that the loop carries out after the command at hand;
    SHUTDOWN ABORT pipelined behind a long SAVE cancels it, as Redis's ABORT cancels a
    shutdown_asap its cron has not acted on."""
    d = made(tmp_path / "d")
    srv = server_factory("inreplay", "--dir", str(d), "--save-on-shutdown")
    r = srv.client()
    blob = os.urandom(32 << 20)
    for i in range(8):
        r.set(f"blob{i}", blob)  # a SAVE of 256 MB, fsynced: long enough to signal into
    with srv.raw(timeout=60) as c:
        c.send(c.command("SAVE") + c.command("SHUTDOWN", "ABORT") + c.command("PING"))
        deadline = time.monotonic() + 20
        while not list(d.glob(".inreplay-*.snap.tmp")):  # the SAVE is under way
            assert time.monotonic() < deadline, "the SAVE never started"
            time.sleep(0.001)
        os.kill(srv.proc.pid, signal.SIGTERM)
        assert c.read_reply() == "OK"  # SAVE
        abort = c.read_reply()
        assert abort == "OK", f"SHUTDOWN ABORT behind the SAVE answered {abort!r}"
        assert c.read_reply() == "PONG"
        time.sleep(0.3)
        assert srv.alive() and "Shutdown manually aborted." in srv.log_tail()
        assert reply(c, "SHUTDOWN", "ABORT") == "ERR No shutdown in progress."
        assert reply(c, "DBSIZE") == 8


def test_a_signal_during_a_command_still_shuts_down(server_factory: Factory, tmp_path: Path
                                                    ) -> None:
    """Without ABORT the signal's shutdown goes ahead, saving on the way out."""
    d = made(tmp_path / "d")
    srv = server_factory("inreplay", "--dir", str(d), "--save-on-shutdown")
    r = srv.client()
    r.set("k", "v")
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.wait(15) == 0, srv.log_tail()
    assert len(snaps(d)) == 1 and "Shutdown manually aborted" not in srv.log_tail()


def test_sigterm_with_a_failing_save_exits_non_zero(server_factory: Factory, tmp_path: Path
                                                    ) -> None:
    d = made(tmp_path / "d")
    srv = server_factory("inreplay", "--dir", str(d), "--save-on-shutdown")
    srv.client().set("k", "v")
    d.rmdir()
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.wait(15) == 1, srv.log_tail()
    last = srv.log_tail().strip().splitlines()[-1]
    assert last.startswith("pyctl start: the snapshot on shutdown failed, the data is NOT "
                           f"saved: cannot create {d}/.inreplay-"), last
    assert last.endswith("No such file or directory")


def test_pyctl_stop_exits_non_zero_when_the_final_save_fails(rundir: Path, tmp_path: Path
                                                             ) -> None:
    d = made(tmp_path / "d")
    listen = f"127.0.0.1:{free_port()}"
    up = pyctl("start", "--daemon", "--listen", listen, "--dir", str(d), "--save-on-shutdown")
    assert up.returncode == 0, up.stderr
    assert f"inreplay: snapshot directory {d}" in up.stdout
    redis.Redis.from_url(f"redis://{listen}", protocol=2).set("k", "v")
    d.rmdir()
    stop = pyctl("stop", "--listen", listen)
    assert stop.returncode == 1, stop
    lines = stop.stderr.strip().splitlines()
    assert len(lines) == 1, stop.stderr
    assert lines[0].startswith("pyctl stop: pid ")
    assert "stopped with an error: the snapshot on shutdown failed" in lines[0]
    assert f"the data is NOT saved: cannot create {d}/.inreplay-" in lines[0]
    assert "stopped pid" not in stop.stdout
    assert pyctl("status", "--listen", listen).returncode == 3
    assert list(rundir.glob("*.exit")) == [] and list(rundir.glob("*.json")) == []
    # the next server on that address stops cleanly: an old failure is not reported again
    made(d)
    assert pyctl("start", "--daemon", "--listen", listen, "--dir", str(d),
                 "--save-on-shutdown").returncode == 0
    again = pyctl("stop", "--listen", listen)
    assert again.returncode == 0 and again.stderr == "", again
    assert len(snaps(d)) == 1


# ---- BGSAVE failures: LASTSAVE, INFO persistence, pyctl status ----------------


def test_bgsave_failure_shows_in_lastsave_and_info_like_redis(server_factory: Factory,
                                                              tmp_path: Path) -> None:
    seen = {}
    for kind in ("redis", "inreplay"):
        d, gone = made(tmp_path / kind / "d"), made(tmp_path / kind / "gone")
        srv = server_factory(kind, *start_args(kind, d, save=False))
        r = srv.client()
        r.set("a", 1)
        assert r.save() is True
        saved = r.lastsave()
        p0 = info(r)
        for k in ("x", "y", "z"):
            r.set(k, k)
        r.config_set("dir", str(gone))
        gone.rmdir()
        time.sleep(1.1)  # a save now would move LASTSAVE
        assert r.bgsave() is True  # "Background saving started": the child fails after
        p = wait_bgsave(r)
        seen[kind] = {
            "lastsave_unchanged": r.lastsave() == saved,
            "last_save_time_unchanged": p["rdb_last_save_time"] == p0["rdb_last_save_time"],
            "status": (p0["rdb_last_bgsave_status"], p["rdb_last_bgsave_status"]),
            "changes": (p0["rdb_changes_since_last_save"], p["rdb_changes_since_last_save"]),
            "in_progress": p["rdb_bgsave_in_progress"],
        }
        if kind == "inreplay":
            assert str(gone) in p["snapshot_last_error"], p
            r.config_set("dir", str(d))
            assert r.bgsave() is True
            p = wait_bgsave(r)
            assert p["rdb_last_bgsave_status"] == "ok" and p["snapshot_last_error"] == ""
            assert p["rdb_changes_since_last_save"] == 0 and r.lastsave() > saved
    assert seen["inreplay"] == seen["redis"]
    assert seen["redis"] == {"lastsave_unchanged": True, "last_save_time_unchanged": True,
                             "status": ("ok", "err"), "changes": (0, 3), "in_progress": 0}


def test_pyctl_status_shows_a_failed_bgsave(server_factory: Factory, tmp_path: Path) -> None:
    d, gone = made(tmp_path / "d"), made(tmp_path / "gone")
    srv = server_factory("inreplay", "--dir", str(d))
    listen = f"127.0.0.1:{srv.port}"
    r = srv.client()
    r.set("k", "v")
    st = json.loads(pyctl("status", "--json", "--listen", listen).stdout)["snapshots"]
    assert st["dir"] == str(d) and st["last_bgsave_status"] == "ok" and st["saves"] == 0
    assert st["changes_since_last_save"] == 1 and st["last_error"] is None
    human = pyctl("status", "--listen", listen).stdout
    assert f"  snapshots: {d}; nothing saved since start, 1 change(s)" in human
    r.config_set("dir", str(gone))
    gone.rmdir()
    r.bgsave()
    wait_bgsave(r)
    out = pyctl("status", "--json", "--listen", listen)
    assert out.returncode == 0
    st = json.loads(out.stdout)["snapshots"]
    assert st["last_bgsave_status"] == "err" and st["bgsave_in_progress"] == 0
    assert st["last_error"].startswith(f"cannot create {gone}/.inreplay-")
    human = pyctl("status", "--listen", listen).stdout
    line = [ln for ln in human.splitlines() if ln.startswith("  snapshots: ")]
    assert line == [f"  snapshots: {gone}; LAST SAVE FAILED: {st['last_error']} (1 change(s) "
                    "since the last good save are not on disk)"], human
    r.config_set("dir", str(d))
    assert r.save() is True
    human = pyctl("status", "--listen", listen).stdout
    assert f"  snapshots: {d}; last saved " in human and ", 0 change(s) since" in human


# ---- --restore and --restore-if-present -----------------------------------------


def test_restore_refuses_without_a_snapshot_restore_if_present_starts_empty(
        server_factory: Factory, tmp_path: Path) -> None:
    empty = made(tmp_path / "empty")
    port = free_port()
    listen = f"127.0.0.1:{port}"
    for mode in ([], ["--daemon"]):
        r = pyctl("start", "--listen", listen, "--restore", str(empty), *mode)
        assert r.returncode == 1, r
        lines = r.stderr.strip().splitlines()
        assert lines == [f"pyctl start: --restore {empty}: no snapshot to restore, refusing to "
                         "start empty (--restore-if-present starts empty when there is none)"]
    r = pyctl("start", "--listen", listen, "--restore", str(empty), "--restore-if-present",
              str(empty))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "--restore-if-present: give it or --restore, not both" in r.stderr
    for where in (empty, tmp_path / "not-yet"):  # none there, or no directory at all
        srv = server_factory("inreplay", "--restore-if-present", str(where))
        assert srv.client().dbsize() == 0 and "nothing to restore" in srv.log_tail()
        assert srv.stop() == 0


def test_restore_if_present_loads_a_snapshot_and_refuses_a_corrupt_one(
        server_factory: Factory, tmp_path: Path) -> None:
    d = made(tmp_path / "d")
    a = server_factory("inreplay", "--dir", str(d))
    a.client().set("k", "v")
    assert a.client().save() is True
    assert a.stop() == 0
    b = server_factory("inreplay", "--restore-if-present", str(d), "--dir", str(d))
    assert b.client().get("k") == b"v"
    assert b.stop() == 0
    (snap,) = snaps(d)
    snap.write_bytes(snap.read_bytes()[:-10])  # truncated: no longer usable
    listen = f"127.0.0.1:{free_port()}"
    for flag in ("--restore-if-present", "--restore"):
        r = pyctl("start", "--daemon", "--listen", listen, flag, str(d))
        assert r.returncode == 1, r
        assert r.stderr.strip().splitlines() == [
            f"pyctl start: no complete snapshot in {d} (1 corrupt): nothing restored"]
