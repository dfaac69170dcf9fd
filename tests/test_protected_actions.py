"""Redis 7's protected actions, with its defaults and words: DEBUG and CONFIG SET
of a protected config (dir) are refused unless enable-debug-command /
enable-protected-configs open them (yes: every client; local: loopback), on
stock redis-server and inreplay alike. Opening one is said at start."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis
from conftest import ServerProcess

KINDS = ("redis", "inreplay")
Factory = Callable[..., ServerProcess]


def _replies(srv: ServerProcess, tmp: str) -> list[object]:
    r = srv.client(decode_responses=True)
    out: list[object] = []
    for cmd in (("DEBUG", "SLEEP", "0"), ("DEBUG", "HELP"), ("CONFIG", "SET", "dir", tmp),
                ("CONFIG", "GET", "enable-debug-command"),
                ("CONFIG", "GET", "enable-protected-configs"),
                ("CONFIG", "SET", "enable-debug-command", "yes")):
        try:
            v = r.execute_command(*cmd)
            out.append("help" if cmd[1] == "HELP" and isinstance(v, list) else v)
        except redis.ResponseError as e:
            out.append(f"error: {e}")
    r.close()
    return out


@pytest.mark.parametrize("setting", ["no", "yes", "local"])
def test_same_as_redis(server_factory: Factory, tmp_path: object, setting: str) -> None:
    got = []
    for kind in KINDS:
        srv = server_factory(kind, "--enable-debug-command", setting,
                             "--enable-protected-configs", setting)
        got.append(_replies(srv, str(tmp_path)))
    assert got[0] == got[1]
    if setting == "no":
        assert str(got[1][0]).startswith("error: DEBUG command not allowed. If the "
                                         "enable-debug-command option is set to \"local\"")
        assert got[1][2] == ("error: CONFIG SET failed (possibly related to argument 'dir') "
                             "- can't set protected config")
    else:  # the tests connect over loopback: local opens them too
        assert got[1][0] == "OK" and got[1][2] == "OK"
    assert got[1][5] == ("error: CONFIG SET failed (possibly related to argument "
                         "'enable-debug-command') - can't set immutable config")


def test_defaults_are_closed_and_opening_is_said(server_factory: Factory) -> None:
    """pyctl start without the flags: both closed (the test pool opens DEBUG explicitly)."""
    from pyctl import config

    cfg = config.ServerConfig()
    assert (cfg.enable_debug_command, cfg.enable_protected_configs) == ("no", "no")
    srv = server_factory("inreplay", "--enable-debug-command", "local", opened=False)
    r = srv.client()
    assert r.execute_command("DEBUG", "SLEEP", "0") == b"OK"
    r.close()
    log = srv.log_tail()
    notices = [ln for ln in log.splitlines() if "enable-debug-command local" in ln]
    assert len(notices) == 1 and "open to loopback clients" in notices[0], log
    assert "enable-protected-configs" not in log


def test_debug_refused_before_authentication_in_redis_order(server_factory: Factory) -> None:
    """The protected check comes before AUTH's, as in Redis's processCommand."""
    got = []
    for kind in KINDS:
        srv = server_factory(kind, "--enable-debug-command", "no")
        with srv.raw() as c:
            c.call("CONFIG", "SET", "requirepass", "pw")
        with srv.raw() as c:
            got.append(c.call("DEBUG", "SLEEP", "0"))
            assert c.call("AUTH", "pw") == "OK"
            c.call("CONFIG", "SET", "requirepass", "")
    assert got[0] == got[1]
