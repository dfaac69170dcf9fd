"""Stock command-line clients (Debian's redis-tools) against both servers."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import TYPE_CHECKING

import numpy as np
import pytest
import redis

from pyctl.client import ReplayClient

if TYPE_CHECKING:
    from conftest import ServerProcess

ERROR_WORDS = re.compile(r"ERR|WARNING|Error|error")


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found: install Debian's redis-tools")
    return path


def cli(
    server: ServerProcess, *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("redis-cli"), "-h", server.host, "-p", str(server.port), *server.cli_auth(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def clean(proc: subprocess.CompletedProcess[str], scan: bool = True) -> str:
    """Assert the tool exited 0 with nothing on stderr and (if `scan`) no
    error words on stdout; return stdout."""
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert proc.stderr == "", proc.stderr[-2000:]
    if scan:
        assert not ERROR_WORDS.search(proc.stdout), proc.stdout[-2000:]
    return proc.stdout


# --------------------------------------------------------------------------
# redis-cli
# --------------------------------------------------------------------------


def test_cli_set_get(server: ServerProcess) -> None:
    assert clean(cli(server, "SET", "a", "b")) == "OK\n"
    assert clean(cli(server, "GET", "a")) == "b\n"
    assert clean(cli(server, "--no-raw", "GET", "a")) == '"b"\n'
    assert clean(cli(server, "--no-raw", "GET", "missing")) == "(nil)\n"
    assert clean(cli(server, "PING")) == "PONG\n"


def test_cli_types_no_raw(server: ServerProcess) -> None:
    assert clean(cli(server, "--no-raw", "RPUSH", "l", "x", "y z")) == "(integer) 2\n"
    assert clean(cli(server, "--no-raw", "LRANGE", "l", "0", "-1")) == '1) "x"\n2) "y z"\n'
    assert clean(cli(server, "--no-raw", "LRANGE", "none", "0", "-1")) == "(empty array)\n"
    assert clean(cli(server, "--no-raw", "INCR", "n")) == "(integer) 1\n"
    assert clean(cli(server, "--no-raw", "ECHO", "a\nb")) == '"a\\nb"\n'


def test_cli_reports_server_errors(server: ServerProcess) -> None:
    cli(server, "SET", "s", "text")
    out = cli(server, "--no-raw", "INCR", "s")
    assert out.stdout == "(error) ERR value is not an integer or out of range\n"


def test_cli_piped_commands(server: ServerProcess) -> None:
    script = "SET x 1\nINCR x\nGET x\nRPUSH lx a b\nLRANGE lx 0 -1\nDEL lx x\nEXISTS x\n"
    assert clean(cli(server, stdin=script)) == "OK\n2\n2\n2\na\nb\n2\n0\n"


def test_cli_info(server: ServerProcess) -> None:
    out = clean(cli(server, "INFO"), scan=False)  # INFO has an "# Errorstats" section
    for section in ("# Server", "# Clients", "# Memory", "# Stats", "# Keyspace"):
        assert section in out


def test_cli_info_replay(inreplay_server: ServerProcess) -> None:
    out = clean(cli(inreplay_server, "INFO", "replay"))
    assert out.startswith("# Replay")


def test_cli_resp3(server: ServerProcess) -> None:
    """redis-cli -3 opens with HELLO 3 and prints RESP3 types."""
    assert clean(cli(server, "-3", "--no-raw", "GET", "missing")) == "(nil)\n"
    assert clean(cli(server, "-3", "--no-raw", "CONFIG", "GET", "maxmemory")) == (
        '1# "maxmemory" => "0"\n'
    )
    assert clean(cli(server, "-3", "--no-raw", "RPUSH", "l3", "a")) == "(integer) 1\n"


# --------------------------------------------------------------------------
# redis-py with its defaults (RESP3 from redis-py 8)
# --------------------------------------------------------------------------


def test_redis_py_defaults(server: ServerProcess) -> None:
    assert int(redis.__version__.split(".")[0]) >= 8, "the stock-client tests need redis-py 8"
    r = redis.Redis(host=server.host, port=server.port, socket_timeout=10,
                    password=server.password)
    try:
        assert r.execute_command("HELLO")[b"proto"] == 3  # what redis-py chose on connect
        assert r.set("a", "1") is True
        assert r.get("a") == b"1"
        assert r.get("missing") is None
        assert r.mget("a", "missing") == [b"1", None]
        assert r.incr("a") == 2
        assert r.rpush("l", "x", "y") == 2
        assert r.lpop("l") == b"x"
        assert r.lpop("none") is None
        assert r.config_get("maxmemory") == {"maxmemory": "0"}
        assert r.ttl("a") == -1
        assert r.client_id() > 0
    finally:
        r.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_replay_client_on_both_protocols(inreplay_server: ServerProcess, protocol: int) -> None:
    with ReplayClient(inreplay_server.host, inreplay_server.port, protocol=protocol) as rc:
        proto = rc.redis.execute_command("HELLO")
        if not isinstance(proto, dict):
            proto = dict(zip(proto[::2], proto[1::2], strict=True))
        fields = proto
        assert fields[b"proto"] == protocol
        rc.create("t", 8)
        ids = rc.add("t", [1.0, 2.0, 3.0], [b"a", b"b", b"c"])
        assert ids.tolist() == [0, 1, 2]
        s = rc.sample("t", 4, beta=0.4)
        assert set(s.ids.tolist()) <= {0, 1, 2} and len(s.ids) == 4
        assert all(item in (b"a", b"b", b"c") for item in s.items)
        assert np.all(s.weights > 0)
        assert rc.update("t", [0, 1], [5.0, 5.0]) == 2
        assert rc.info("t")["size"] == 3
        assert rc.tables() == ["t"]
        rc.drop("t")
        assert rc.tables() == []


# --------------------------------------------------------------------------
# redis-benchmark
# --------------------------------------------------------------------------

RATE = re.compile(r"^(?P<name>[A-Z_]+(?: \(\d+ keys\))?): (?P<rate>[0-9.]+) requests per second")


def benchmark(server: ServerProcess, *args: str) -> dict[str, float]:
    proc = subprocess.run(
        [tool("redis-benchmark"), "-h", server.host, "-p", str(server.port), "-q",
         *server.cli_auth(benchmark=True), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    for stream in (proc.stdout, proc.stderr):
        # progress lines print "-nan" before the first sample; nothing else alarms
        assert not ERROR_WORDS.search(stream), stream[-2000:]
    rates = {}
    for line in re.split(r"[\r\n]", proc.stdout):
        m = RATE.match(line.strip())
        if m:
            rates[m["name"]] = float(m["rate"])
    assert rates, proc.stdout[-2000:]
    assert all(v > 0 for v in rates.values()), rates
    return rates


@pytest.mark.slow
def test_benchmark_command_mix(server: ServerProcess) -> None:
    rates = benchmark(server, "-n", "20000", "-t", "ping,set,get,incr,lpush,rpush,lpop,rpop,mset")
    assert set(rates) == {
        "PING_INLINE",
        "PING_MBULK",
        "SET",
        "GET",
        "INCR",
        "LPUSH",
        "RPUSH",
        "LPOP",
        "RPOP",
        "MSET (10 keys)",
    }
    # the benchmark really wrote: INCR's counter and MSET's keys are there
    assert int(clean(cli(server, "GET", "counter:__rand_int__"))) == 20000
    assert clean(cli(server, "EXISTS", "key:__rand_int__")) == "1\n"


@pytest.mark.slow
def test_benchmark_pipelined(server: ServerProcess) -> None:
    rates = benchmark(server, "-c", "50", "-P", "16", "-n", "100000", "-t", "set,get")
    assert set(rates) == {"SET", "GET"}
    value = clean(cli(server, "GET", "key:__rand_int__"))
    assert len(value) == 3 + 1  # the default -d 3 payload, and redis-cli's newline
