"""Transactions (MULTI, EXEC, DISCARD, WATCH, UNWATCH) against both servers.

Every test runs against stock redis-server 7.0.15 and inreplay with the same
expectations, over raw RESP connections so the exact replies are compared.
WATCH tests that rely on another command's write (SET, DEL, FLUSHALL)
depend on that command calling signalModifiedKey / signalFlushedDb.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from conftest import RespError

# also over the same-host rings (server kind shm), against stock Redis as the others
pytestmark = pytest.mark.also_shm

if TYPE_CHECKING:
    from conftest import RawConn, ServerProcess

Raw = Callable[[], "RawConn"]


def err(text: str) -> RespError:
    return RespError(text.encode())


def test_multi_exec_queues_and_runs(raw: Raw) -> None:
    c = raw()
    c.call("DEL", "mx")
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "mx", "1") == "QUEUED"
    assert c.call("INCR", "mx") == "QUEUED"
    assert c.call("GET", "mx") == "QUEUED"
    assert c.call("EXEC") == ["OK", 2, b"2"]
    assert c.call("GET", "mx") == b"2"
    assert c.call("MULTI") == "OK"
    assert c.call("EXEC") == []


def test_exec_aborts_after_a_refused_command(raw: Raw) -> None:
    c = raw()
    c.call("DEL", "ma")
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "ma", "1") == "QUEUED"
    assert c.call("NOSUCHCMD", "x") == err(
        "ERR unknown command 'NOSUCHCMD', with args beginning with: 'x' "
    )
    assert c.call("EXEC") == err("EXECABORT Transaction discarded because of previous errors.")
    assert c.call("GET", "ma") is None
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "ma") == err("ERR wrong number of arguments for 'set' command")
    assert c.call("SET", "ma", "2") == "QUEUED"
    assert c.call("EXEC") == err("EXECABORT Transaction discarded because of previous errors.")
    assert c.call("GET", "ma") is None
    # the client is out of MULTI again
    assert c.call("EXEC") == err("ERR EXEC without MULTI")


def test_runtime_errors_inside_exec_do_not_stop_it(raw: Raw) -> None:
    c = raw()
    c.call("SET", "mr", "notanumber")
    assert c.call("MULTI") == "OK"
    assert c.call("INCR", "mr") == "QUEUED"
    assert c.call("SET", "mr2", "v") == "QUEUED"
    assert c.call("EXEC") == [err("ERR value is not an integer or out of range"), "OK"]
    assert c.call("GET", "mr2") == b"v"


def test_transaction_errors(raw: Raw) -> None:
    c = raw()
    assert c.call("EXEC") == err("ERR EXEC without MULTI")
    assert c.call("DISCARD") == err("ERR DISCARD without MULTI")
    assert c.call("MULTI") == "OK"
    assert c.call("MULTI") == err("ERR MULTI calls can not be nested")
    assert c.call("WATCH", "x") == err("ERR WATCH inside MULTI is not allowed")
    assert c.call("PING") == "QUEUED"
    # neither error aborts the transaction
    assert c.call("EXEC") == ["PONG"]
    assert c.call("WATCH") == err("ERR wrong number of arguments for 'watch' command")
    assert c.call("MULTI", "x") == err("ERR wrong number of arguments for 'multi' command")


def test_discard_drops_the_queue_and_the_watches(raw: Raw) -> None:
    c, other = raw(), raw()
    c.call("SET", "md", "0")
    assert c.call("WATCH", "md") == "OK"
    assert c.call("MULTI") == "OK"
    assert c.call("INCR", "md") == "QUEUED"
    assert c.call("DISCARD") == "OK"
    assert c.call("GET", "md") == b"0"
    other.call("SET", "md", "5")  # no longer watched: the next EXEC runs
    assert c.call("MULTI") == "OK"
    assert c.call("INCR", "md") == "QUEUED"
    assert c.call("EXEC") == [6]


def test_watch_fails_exec_after_another_clients_write(raw: Raw) -> None:
    c, other = raw(), raw()
    c.call("SET", "mw", "1")
    assert c.call("WATCH", "mw") == "OK"
    other.call("SET", "mw", "2")
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "mw", "3") == "QUEUED"
    assert c.call("EXEC") is None
    assert c.call("GET", "mw") == b"2"
    # after EXEC nothing is watched any more
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "mw", "4") == "QUEUED"
    other.call("SET", "mw", "5")
    assert c.call("EXEC") == ["OK"]


def test_watch_sees_delete_of_a_watched_key_and_own_writes(raw: Raw) -> None:
    c, other = raw(), raw()
    c.call("SET", "mdel", "1")
    c.call("WATCH", "mdel")
    other.call("DEL", "mdel")
    c.call("MULTI")
    c.call("PING")
    assert c.call("EXEC") is None
    # a write of the watching client itself before MULTI counts too
    c.call("WATCH", "mdel")
    c.call("SET", "mdel", "x")
    c.call("MULTI")
    c.call("PING")
    assert c.call("EXEC") is None


def test_unwatch_forgets_the_keys(raw: Raw) -> None:
    c, other = raw(), raw()
    c.call("WATCH", "mu1", "mu2")
    assert c.call("UNWATCH") == "OK"
    other.call("SET", "mu1", "x")
    c.call("MULTI")
    c.call("PING")
    assert c.call("EXEC") == ["PONG"]


def test_watched_key_expiring_fails_exec(raw: Raw) -> None:
    c = raw()
    c.call("SET", "mexp", "v", "PX", "100")
    assert c.call("WATCH", "mexp") == "OK"
    time.sleep(0.3)  # expired: lazily or by the cron, either way EXEC fails
    c.call("MULTI")
    c.call("PING")
    assert c.call("EXEC") is None


def test_key_expired_before_watch_does_not_fail_exec(raw: Raw) -> None:
    c = raw()
    c.call("SET", "mexp2", "v", "PX", "1")
    time.sleep(0.05)
    c.call("WATCH", "mexp2")
    c.call("MULTI")
    c.call("PING")
    assert c.call("EXEC") == ["PONG"]


def test_flushall_fails_exec_of_a_watched_existing_key(raw: Raw) -> None:
    c, other = raw(), raw()
    c.call("SET", "mflush", "v")
    c.call("WATCH", "mflush")
    other.call("FLUSHALL")
    c.call("MULTI")
    c.call("PING")
    assert c.call("EXEC") is None


def test_big_and_echoed_arguments_survive_the_queue(raw: Raw) -> None:
    c = raw()
    big = bytes(range(256)) * 400  # 100 KB: its own buffer, taken over by the queue
    mid = b"m" * 8000  # referenced, not copied, by ECHO's reply
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "mbig", big) == "QUEUED"
    assert c.call("ECHO", mid) == "QUEUED"
    assert c.call("GET", "mbig") == "QUEUED"
    assert c.call("EXEC") == ["OK", mid, big]


def test_client_list_shows_the_transaction(server: ServerProcess, raw: Raw) -> None:
    c = raw()
    c.call("MULTI")
    c.call("PING")
    c.call("PING")
    line = c.call("CLIENT", "INFO")
    assert line == "QUEUED"
    c.call("EXEC")
    c.call("MULTI")
    c.call("PING")
    other = raw()
    lines = other.call("CLIENT", "LIST").decode().splitlines()
    mine = [ln for ln in lines if "flags=x" in ln]
    assert len(mine) == 1 and " multi=1 " in mine[0]
    c.call("DISCARD")


def test_watch_race_counts_every_successful_exec(server: ServerProcess) -> None:
    """Four clients increment one counter with WATCH/GET/MULTI/SET/EXEC;
    whatever interleaving, the counter equals the number of EXECs that ran."""
    with server.raw() as c:
        c.call("SET", "mrace", "0")
    done: list[int] = []
    errors: list[BaseException] = []

    def worker() -> None:
        ok = 0
        try:
            with server.raw() as w:
                for _ in range(150):
                    w.call("WATCH", "mrace")
                    v = int(w.call("GET", "mrace"))
                    w.call("MULTI")
                    w.call("SET", "mrace", str(v + 1))
                    if w.call("EXEC") is not None:
                        ok += 1
        except BaseException as e:  # reported by the main thread
            errors.append(e)
        done.append(ok)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    with server.raw() as c:
        assert int(c.call("GET", "mrace")) == sum(done)
    assert sum(done) >= 150
