"""Command flags are defined once, as Redis's flag words in the command table, and the
server acts on those words: what COMMAND INFO shows is what the server does."""

from __future__ import annotations

import socket
from typing import Any

import redis
from helpers import mbulk


def _commands(r: redis.Redis) -> dict[str, tuple[int, set[str]]]:
    """COMMAND's arity and flag words per command (redis-py parses the reply)."""
    return {str(name): (int(info["arity"]),
                        {f.decode() if isinstance(f, bytes) else str(f) for f in info["flags"]})
            for name, info in r.command().items()}


def test_no_auth_word_is_what_runs_before_auth(server_factory: Any) -> None:
    srv = server_factory("inreplay")
    admin = redis.Redis(port=srv.port, protocol=2)
    commands = _commands(admin)
    admin.config_set("requirepass", "pw")
    admin.close()
    for name, (arity, words) in sorted(commands.items()):
        if name in ("quit", "shutdown", "monitor", "debug", "subscribe", "psubscribe"):
            continue  # they end or change the connection; covered elsewhere
        args = ["x"] * (abs(arity) - 1)  # the arity is checked first, as in Redis
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
            s.sendall(mbulk(name, *args))
            reply = s.recv(4096)
        refused = reply.startswith(b"-NOAUTH Authentication required")  # not HELLO's own
        assert refused == ("no_auth" not in words), (name, words, reply[:80])


def test_denyoom_word_is_what_maxmemory_refuses(server_factory: Any) -> None:
    srv = server_factory("inreplay", "--maxmemory", "1")
    r = redis.Redis(port=srv.port, protocol=2)
    commands = _commands(r)
    calls = {"set": ("k", "v"), "lpush": ("l", "v"), "hset": ("h", "f", "v"), "sadd": ("s", "m"),
             "append": ("k", "v"), "replay.add": ("t", 1, "x"), "del": ("k",), "get": ("k",),
             "incrbyfloat": ("n", "1.5"), "expire": ("k", "10")}
    for name, args in calls.items():
        try:
            r.execute_command(name, *args)
            oom = False
        except redis.exceptions.OutOfMemoryError:
            oom = True
        except redis.ResponseError:
            oom = False  # another error: the command ran
        assert oom == ("denyoom" in commands[name][1]), (name, commands[name])
    r.close()


def test_replay_sample_is_a_write(server_factory: Any) -> None:
    """REPLAY.SAMPLE was flagged readonly, yet it advances the table's generator and
    the limiter's counters and wakes inserters. It is a write, and counts as a change."""
    srv = server_factory("inreplay")
    r = redis.Redis(port=srv.port, protocol=2)
    info = r.execute_command("COMMAND", "INFO", "replay.sample")["replay.sample"]
    assert "write" in info["flags"] and "readonly" not in info["flags"], info["flags"]
    spec = info["key_specifications"][0]
    flags = spec[spec.index(b"flags") + 1]
    assert b"RW" in flags and b"RO" not in flags, spec
    r.execute_command("REPLAY.CREATE", "w", "CAPACITY", 10)
    r.execute_command("REPLAY.ADD", "w", 1, "x")
    before = r.info("persistence")["rdb_changes_since_last_save"]
    r.execute_command("REPLAY.SAMPLE", "w", 4)
    assert r.info("persistence")["rdb_changes_since_last_save"] == before + 1
    r.close()
