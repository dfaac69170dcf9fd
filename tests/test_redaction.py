"""Credentials in MONITOR and SLOWLOG, against stock redis-server 7.0.15 and inreplay.

Redis 7.0 shows AUTH and HELLO to monitors with their user and password replaced by
"(redacted)" (in the order HELLO reads its options: a failed AUTH or a bad name ends
it, what follows is shown as given), and shows no administrative command at all (ACL
SETUSER, CONFIG SET). The slow log keeps those too, with the same arguments redacted,
ACL SETUSER's every rule and CONFIG SET's sensitive values among them. Each server is
this module's own (passwords and users change).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from conftest import RawConn, ServerProcess

KINDS = ("redis", "inreplay")
SECRETS = ("monpass1", "badpass2", "badpass3", "hellopw4", "hellobad5", "cfgpw6", "rulepw7",
           "setuserpw8", "masterpw9", "multipw10")

# (command, whether it is an error) in the order sent; END marks the last one
COMMANDS: list[tuple[str, ...]] = [
    ("ACL", "SETUSER", "mon_u", "on", ">monpass1", "+@all", "~*", "&*"),
    ("AUTH", "mon_u", "monpass1"),
    ("AUTH", "badpass2"),  # the default user has no password: an error, still redacted
    ("AUTH", "mon_u", "badpass3"),
    ("AUTH", "a", "b", "c"),  # a syntax error: nothing redacted
    ("HELLO", "2", "AUTH", "mon_u", "monpass1"),
    ("HELLO", "2", "AUTH", "mon_u", "hellobad5", "SETNAME", "shown"),  # ends at the AUTH
    ("HELLO", "2", "SETNAME", "bad name", "AUTH", "mon_u", "shown-too"),  # ends at the name
    ("HELLO", "4", "AUTH", "mon_u", "shown-three"),  # NOPROTO before the options
    ("HELLO", "2", "SETNAME", "mon_name", "AUTH", "mon_u", "monpass1", "BOGUS"),
    ("HELLO", "2", "AUTH", "default", "hellopw4"),
    ("CONFIG", "SET", "requirepass", "cfgpw6"),
    ("CONFIG", "SET", "maxmemory-policy", "noeviction", "masterauth", "masterpw9"),
    ("CONFIG", "SET", "nosuchparam", "x", "masteruser", "masterpw9"),  # an error, redacted
    ("CONFIG", "SET", "requirepass", "odd", "extra"),  # odd: a syntax error, nothing redacted
    ("ACL", "SETUSER", "other", "on", ">setuserpw8", "#" + "ab" * 32, "<rulepw7"),
    ("ACL", "SETUSER", "other", "nosuchrule"),  # an error, redacted all the same
    ("AUTH", "default", "cfgpw6"),
    ("MULTI",),
    ("AUTH", "mon_u", "multipw10"),
    ("EXEC",),
    ("CONFIG", "SET", "requirepass", ""),
    ("ECHO", "END"),
]

STAMP = re.compile(r"^\d+\.\d{6} \[\d+ [^\]]+\] (.*)$")


@pytest.fixture(scope="module")
def red_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    servers: dict[str, ServerProcess] = {}
    try:
        for kind in KINDS:
            servers[kind] = ServerProcess(kind, tmp_path_factory.mktemp(f"redact-{kind}"))
        yield servers
    finally:
        for s in servers.values():
            s.stop()


def run_all(srv: ServerProcess) -> tuple[list[str], list[list[bytes]], list[object]]:
    """Run COMMANDS under a monitor with everything slow-logged: (monitor lines minus
    time and client, slow log entries' arguments oldest first, the replies)."""
    admin = srv.raw()
    assert admin.call("CONFIG", "SET", "slowlog-log-slower-than", "0") == "OK"
    assert admin.call("SLOWLOG", "RESET") == "OK"
    mon, c = srv.raw(), srv.raw()
    assert mon.call("MONITOR") == "OK"
    replies = [c.call(*cmd) for cmd in COMMANDS]
    lines: list[str] = []
    while not lines or lines[-1] != '"ECHO" "END"':
        m = STAMP.match(mon.read_reply())
        assert m, lines
        lines.append(m[1])
    admin.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")
    entries = admin.call("SLOWLOG", "GET", "-1")
    args = [e[3] for e in reversed(entries)]
    admin.call("CONFIG", "SET", "slowlog-log-slower-than", "10000")
    admin.call("ACL", "DELUSER", "mon_u", "other")
    admin.call("CONFIG", "SET", "masterauth", "", "masteruser", "")
    for conn in (mon, c, admin):
        conn.close()
    return lines, args, replies


def test_monitor_and_slowlog_redact_credentials(red_servers: dict[str, ServerProcess]) -> None:
    got = {kind: run_all(red_servers[kind]) for kind in KINDS}
    (r_lines, r_args, r_replies), (i_lines, i_args, i_replies) = got["redis"], got["inreplay"]
    assert i_lines == r_lines
    assert i_args == r_args
    assert [type(x) for x in i_replies] == [type(x) for x in r_replies]
    for lines, args in ((r_lines, r_args), (i_lines, i_args)):
        text = "\n".join(lines) + repr(args)
        for secret in SECRETS:
            assert secret not in text
    # what Redis 7.0.15 shows (and so inreplay)
    assert r_lines[:4] == [
        '"AUTH" "(redacted)" "(redacted)"',
        '"AUTH" "(redacted)"',
        '"AUTH" "(redacted)" "(redacted)"',
        '"AUTH" "a" "b" "c"',
    ]
    assert '"HELLO" "2" "AUTH" "(redacted)" "(redacted)" "SETNAME" "shown"' in r_lines
    assert '"HELLO" "2" "SETNAME" "bad name" "AUTH" "mon_u" "shown-too"' in r_lines
    assert not any(ln.startswith(('"ACL"', '"CONFIG"')) for ln in r_lines)
    assert [b"ACL", b"SETUSER", b"(redacted)", b"(redacted)"] in r_args
    assert [b"CONFIG", b"SET", b"nosuchparam", b"x", b"masteruser", b"(redacted)"] in r_args
    assert [b"CONFIG", b"SET", b"requirepass", b"odd", b"extra"] in r_args


def test_monitor_of_unauthenticated_auth(red_servers: dict[str, ServerProcess]) -> None:
    """A client not yet authenticated: its AUTH is shown redacted, its refused
    commands not at all."""
    lines: dict[str, list[str]] = {}
    for kind in KINDS:
        srv = red_servers[kind]
        admin = srv.raw()
        mon = srv.raw()
        assert mon.call("MONITOR") == "OK"
        assert admin.call("CONFIG", "SET", "requirepass", "unauthpw") == "OK"
        c = RawConn(srv.host, srv.port)
        assert "NOAUTH" in str(c.call("GET", "k"))
        assert "WRONGPASS" in str(c.call("AUTH", "wrongpw"))
        assert c.call("AUTH", "unauthpw") == "OK"
        assert c.call("CONFIG", "SET", "requirepass", "") == "OK"
        assert c.call("ECHO", "END") == b"END"
        got: list[str] = []
        while not got or got[-1] != '"ECHO" "END"':
            m = STAMP.match(mon.read_reply())
            assert m, got
            got.append(m[1])
        lines[kind] = got
        for conn in (mon, c, admin):
            conn.close()
    assert lines["inreplay"] == lines["redis"] == [
        '"AUTH" "(redacted)"', '"AUTH" "(redacted)"', '"ECHO" "END"']


def test_monitor_shows_the_database(red_servers: dict[str, ServerProcess]) -> None:
    """The number in the brackets is the client's SELECTed database (a script's too),
    as Redis shows it: it was always 0."""
    shown: dict[str, list[str]] = {}
    for kind in KINDS:
        srv = red_servers[kind]
        mon, c = srv.raw(), srv.raw()
        assert mon.call("MONITOR") == "OK"
        assert c.call("SELECT", "3") == "OK"
        assert c.call("AUTH", "default", "anything") == "OK"  # nopass: any password
        assert c.call("EVAL", "return redis.call('echo', 'x')", "0") == b"x"
        assert c.call("SELECT", "0") == "OK"
        assert c.call("ECHO", "END") == b"END"
        got: list[str] = []
        while not got or not got[-1].endswith('"ECHO" "END"'):
            line = mon.read_reply()
            got.append(re.sub(r"^\d+\.\d{6} \[(\d+) (lua|[^\]]+:\d+)\]",
                              lambda m: f"[{m[1]} {'lua' if m[2] == 'lua' else 'client'}]", line))
        shown[kind] = got
        mon.close()
        c.close()
    assert shown["inreplay"] == shown["redis"] == [
        '[3 client] "SELECT" "3"',
        '[3 client] "AUTH" "(redacted)" "(redacted)"',
        '[3 client] "EVAL" "return redis.call(\'echo\', \'x\')" "0"',
        '[3 lua] "echo" "x"',
        '[0 client] "SELECT" "0"',
        '[0 client] "ECHO" "END"',
    ]
