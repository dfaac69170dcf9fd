"""ACL users, against stock redis-server 7.0.15 and inreplay with redis-py.

The servers here are this module's own (users and the default user's password
change; an aclfile is set at start), one of each kind. Replies that should
match are compared with stock redis-server's (ACL CAT, GETUSER, LIST, DRYRUN,
SETUSER's errors, NOPERM texts, COMMAND INFO's categories); the @replay tests
run against inreplay only.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest import ServerProcess

KINDS = ("redis", "inreplay")

NOPERM_CMD = "this user has no permissions to run the '{}' command"
NOPERM_KEY = "this user has no permissions to access one of the keys used as arguments"
NOPERM_CHANNEL = "this user has no permissions to access one of the channels used as arguments"


@pytest.fixture(scope="module")
def acl_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    servers: dict[str, ServerProcess] = {}
    try:
        for kind in KINDS:
            d = tmp_path_factory.mktemp(f"acl-{kind}")
            aclfile = d / "users.acl"
            aclfile.write_text("")
            servers[kind] = ServerProcess(kind, d, ("--aclfile", str(aclfile)))
            servers[kind].aclfile = aclfile  # type: ignore[attr-defined]
        yield servers
    finally:
        for s in servers.values():
            s.stop()


@pytest.fixture(params=KINDS)
def srv(
    request: pytest.FixtureRequest, acl_servers: dict[str, ServerProcess]
) -> Iterator[ServerProcess]:
    s = acl_servers[request.param]
    admin = s.client()
    yield s
    # back to the start: only the default user, nopass, +@all ~* &*
    admin = s.client()
    for u in admin.acl_users():
        if u != "default":
            admin.acl_deluser(u)
    admin.execute_command("ACL", "SETUSER", "default", "reset", "on", "nopass", "+@all", "~*", "&*")
    admin.config_set("requirepass", "")
    admin.flushall()
    admin.close()


def both(acl_servers: dict[str, ServerProcess]) -> list[redis.Redis]:
    return [acl_servers[k].client(decode_responses=True) for k in KINDS]


def err(fn: Any, *args: Any) -> str:
    with pytest.raises(redis.ResponseError) as e:
        fn(*args)
    return str(e.value)


def as_user(s: ServerProcess, user: str, password: str, decode: bool = True) -> redis.Redis:
    return s.client(username=user, password=password, decode_responses=decode)


# --------------------------------------------------------------------------
# the @replay category: one experiment's tables
# --------------------------------------------------------------------------


def test_replay_user_limited_to_its_experiment(acl_servers: dict[str, ServerProcess]) -> None:
    s = acl_servers["inreplay"]
    admin = s.client()
    try:
        assert admin.execute_command("ACL", "SETUSER", "exp1", "on", ">pw1", "~exp1:*", "+@replay",
                                     "+acl|whoami")
        admin.execute_command("REPLAY.CREATE", "exp2:t", "CAPACITY", 64)
        u = as_user(s, "exp1", "pw1", decode=False)
        assert u.execute_command("ACL", "WHOAMI") == b"exp1"
        u.execute_command("REPLAY.CREATE", "exp1:t", "CAPACITY", 64)
        ids = u.execute_command("REPLAY.ADD", "exp1:t", 1.0, b"a", 2.0, b"b")
        assert list(ids) == [0, 1]
        rep = u.execute_command("REPLAY.SAMPLE", "exp1:t", 4)
        assert all(i in (0, 1) for i in struct.unpack("<4q", rep[0]))
        assert err(u.execute_command, "REPLAY.SAMPLE", "exp2:t", 4) == NOPERM_KEY
        assert err(u.execute_command, "REPLAY.ADD", "exp2:t", 1.0, b"x") == NOPERM_KEY
        assert err(u.execute_command, "REPLAY.DROP", "exp2:t") == NOPERM_KEY
        assert err(u.execute_command, "REPLAY.STREAM", "exp2:s", "END") == NOPERM_KEY
        assert err(u.flushall) == NOPERM_CMD.format("flushall")
        assert err(u.get, "exp1:k") == NOPERM_CMD.format("get")
        assert err(u.config_get, "maxmemory") == NOPERM_CMD.format("config|get")
        # exp2's table is untouched; the ACL LOG names the refusals
        assert admin.execute_command("REPLAY.INFO", "exp2:t")
        log = admin.acl_log()
        seen = {(e["reason"], e["object"]) for e in log}
        assert seen >= {("key", "exp2:t"), ("command", "flushall")}
        assert all(e["username"] == "exp1" for e in log if e["object"] != "client|setinfo")
        u.close()
    finally:
        admin.execute_command("ACL", "DELUSER", "exp1")
        admin.execute_command("ACL", "LOG", "RESET")
        admin.close()


def test_replay_category_and_its_flags(acl_servers: dict[str, ServerProcess]) -> None:
    r = acl_servers["inreplay"].client(decode_responses=True)
    cat = r.execute_command("ACL", "CAT", "replay")
    assert {"replay.create", "replay.add", "replay.sample", "replay.drop"} <= set(cat)
    assert "replay" in r.execute_command("ACL", "CAT")
    assert "replay.info" in r.execute_command("ACL", "CAT", "read")
    assert "replay.add" in r.execute_command("ACL", "CAT", "write")
    assert "replay.add" not in r.execute_command("ACL", "CAT", "read")


# --------------------------------------------------------------------------
# differential: replies that must match stock redis-server
# --------------------------------------------------------------------------


def _command_categories(r: redis.Redis) -> dict[str, list[str]]:
    conn = r.connection_pool.get_connection()
    try:
        conn.send_command("COMMAND")
        out: dict[str, list[str]] = {}

        def walk(info: list[Any]) -> None:
            name = info[0].decode() if isinstance(info[0], bytes) else info[0]
            out[name] = sorted(c.decode() if isinstance(c, bytes) else c for c in info[6])
            for sub in info[9]:
                walk(sub)

        for info in conn.read_response():
            walk(info)
        return out
    finally:
        r.connection_pool.release(conn)


def test_command_categories_match_redis(acl_servers: dict[str, ServerProcess]) -> None:
    stock, ours = both(acl_servers)
    a, b = _command_categories(stock), _command_categories(ours)
    # CLIENT SETINFO is Redis 7.2's
    known = {"client|setinfo"}
    differ = {k: (a[k], b[k]) for k in b if k in a and k not in known and a[k] != b[k]}
    assert differ == {}
    assert len([k for k in b if k in a]) > 250


def test_acl_cat_matches_redis(acl_servers: dict[str, ServerProcess]) -> None:
    stock, ours = both(acl_servers)
    ours_cats = ours.execute_command("ACL", "CAT")
    stock_cats = stock.execute_command("ACL", "CAT")
    # the categories with commands here, in Redis's order, and @replay
    assert [c for c in ours_cats if c != "replay"] == [c for c in stock_cats if c in ours_cats]
    have = set(_command_categories(ours))
    for cat in stock_cats:
        want = {c for c in stock.execute_command("ACL", "CAT", cat) if c in have}
        if cat in ("slow", "connection"):
            want.add("client|setinfo")
        got = set(ours.execute_command("ACL", "CAT", cat))
        got -= {c for c in have if c.startswith(("replay.", "param."))}
        assert got == want, cat
    assert err(ours.execute_command, "ACL", "CAT", "nosuch") == err(
        stock.execute_command, "ACL", "CAT", "nosuch")


RULES = [
    ["on", ">p1", "~a*", "%R~b*", "%W~c*", "&ch*", "-@all", "+@string"],
    # descriptions over a reply's by-reference size (4 KB): GETUSER builds the
    # keys and channels texts in one buffer and LIST a buffer per user, freed
    # or rewritten before the reply is written
    ["on", ">pw", "~k*", "%R~" + "x" * 5000],
    ["on", ">pw", "&" + "c" * 5000, "&d*"],
    ["on", "nopass", "+@all", "-@dangerous", "~*", "resetchannels"],
    ["off", "#" + hashlib.sha256(b"x").hexdigest(), "-@all", "+get"],
    ["on", "nopass", "allkeys", "allchannels", "allcommands", "-flushall"],
    ["on", ">a", ">b", "<a", "-@all", "+@hash", "+@list", "~h:*"],
    ["reset"],
    [],
]


def _rules_id(rules: list[str]) -> str:
    return " ".join(x if len(x) <= 24 else f"{x[:8]}...({len(x)} chars)" for x in rules) or "new"


@pytest.mark.parametrize("rules", RULES, ids=_rules_id)
def test_getuser_and_list_match_redis(
    acl_servers: dict[str, ServerProcess], rules: list[str]
) -> None:
    replies = []
    for r in both(acl_servers):
        try:
            assert r.execute_command("ACL", "SETUSER", "du", *rules)
            listed = [x for x in r.execute_command("ACL", "LIST") if x.startswith("user du ")]
            replies.append((r.execute_command("ACL", "GETUSER", "du"), listed))
        finally:
            r.execute_command("ACL", "DELUSER", "du")
            r.close()
    assert replies[0] == replies[1]


BAD_RULES = [
    ["~*", "~x"], ["&*", "&x"], ["%Z~x"], ["+nosuchcommand"], ["-@nosuchcat"], ["<nopw"],
    ["#abc"], ["!" + "0" * 64], ["+config|get|maxmemory"], ["+get|key|key"], ["-select|0"],
    ["+config|nosuch"], ["bogus"], ["%~k*"], ["%"],
]


@pytest.mark.parametrize("rules", BAD_RULES, ids=lambda r: " ".join(r))
def test_setuser_errors_match_redis(
    acl_servers: dict[str, ServerProcess], rules: list[str]
) -> None:
    errors = []
    for r in both(acl_servers):
        errors.append(err(r.execute_command, "ACL", "SETUSER", "bad", *rules))
        assert r.execute_command("ACL", "GETUSER", "bad") is None  # all or nothing
        r.close()
    assert errors[0] == errors[1]
    assert errors[0].startswith("Error in ACL SETUSER modifier")


DRYRUNS = [
    ["get", "a1"], ["get", "zz"], ["set", "b1", "v"], ["set", "c1", "v"], ["get", "c1"],
    ["incr", "a1"], ["publish", "ch1", "m"], ["publish", "zz", "m"], ["flushall"],
    ["client", "id"], ["client", "kill", "id", "1"], ["mset", "a1", "1", "zz", "2"],
    ["lmove", "a1", "zz", "left", "right"], ["select", "0"], ["select", "1"], ["subscribe", "zz"],
]


def test_dryrun_matches_redis(acl_servers: dict[str, ServerProcess]) -> None:
    rules = ["on", "nopass", "~a*", "%R~b*", "%W~c*", "&ch*", "+@all", "-@dangerous",
             "-client", "+client|id", "-select", "+select|0"]
    for r in both(acl_servers):
        r.execute_command("ACL", "SETUSER", "dry", *rules)
    try:
        for args in DRYRUNS:
            got = []
            for r in both(acl_servers):
                got.append(r.execute_command("ACL", "DRYRUN", "dry", *args))
                r.close()
            assert got[0] == got[1], args
        for args in (["nouser", "get", "a"], ["dry", "nocmd"], ["dry", "get"]):
            e = [err(r.execute_command, "ACL", "DRYRUN", *args) for r in both(acl_servers)]
            assert e[0] == e[1], args
    finally:
        for r in both(acl_servers):
            r.execute_command("ACL", "DELUSER", "dry")
            r.close()


def test_noperm_texts_match_redis(acl_servers: dict[str, ServerProcess]) -> None:
    got = []
    for kind in KINDS:
        s = acl_servers[kind]
        admin = s.client()
        admin.execute_command("ACL", "SETUSER", "np", "on", ">pw", "~k:*", "&c:*", "+@all",
                              "-flushall", "-client|kill")
        u = as_user(s, "np", "pw")
        row = [err(u.flushall), err(u.get, "x"), err(u.publish, "x", "m"),
               err(u.execute_command, "CLIENT", "KILL", "ID", "99"),
               err(u.eval, "return redis.call('get', 'x')", 0)]
        u.set("k:1", "v")
        p = u.pipeline()
        p.set("k:2", "v").get("x")
        with pytest.raises(redis.ResponseError):
            p.execute()
        assert u.get("k:2") is None  # the transaction never ran
        got.append(row)
        u.close()
        admin.execute_command("ACL", "DELUSER", "np")
        admin.close()
    assert got[0] == got[1]
    assert got[0][0] == NOPERM_CMD.format("flushall")
    assert got[0][1] == NOPERM_KEY
    assert got[0][2] == NOPERM_CHANNEL


SORT_RULES = [["~pub:*"], ["%R~pub:*", "%W~*"], ["%R~*"], ["~*"], ["allkeys"], ["%W~*"]]


@pytest.mark.parametrize("keys", SORT_RULES, ids=" ".join)
def test_sort_by_and_get_need_access_to_every_key(
    acl_servers: dict[str, ServerProcess], keys: list[str]
) -> None:
    """BY and GET read keys no argument names: a user limited to some keys must not
    read secret:* through them (Redis 7.0 refuses both unless it may read all keys)."""
    got = []
    for kind in KINDS:
        s = acl_servers[kind]
        admin = s.client()
        admin.execute_command("ACL", "SETUSER", "so", "on", ">pw", "+@all", *keys)
        admin.rpush("pub:l", "2", "1")
        admin.mset({"secret:1": "s1", "secret:2": "s2", "w_1": "9", "w_2": "8"})
        u = as_user(s, "so", "pw")
        row = []
        for args in (("GET", "secret:*"), ("BY", "w_*"), ("BY", "nosort"), ("GET", "#"),
                     ("BY", "nosort", "GET", "secret:*"), ("ALPHA", "LIMIT", "0", "1")):
            try:
                row.append(u.execute_command("SORT", "pub:l", *args))
            except redis.ResponseError as e:
                row.append(f"error: {e}")
        try:
            row.append(u.eval("return redis.call('sort', KEYS[1], 'get', 'secret:*')", 1, "pub:l"))
        except redis.ResponseError as e:
            row.append(f"error: {str(e).split(' script:')[0]}")
        got.append(row)
        u.close()
        admin.execute_command("ACL", "DELUSER", "so")
        admin.delete("pub:l", "secret:1", "secret:2", "w_1", "w_2")
        admin.close()
    assert got[0] == got[1]
    if keys in (["~pub:*"], ["%R~pub:*", "%W~*"]):
        assert got[1][0] == "error: GET option of SORT denied due to insufficient ACL permissions."
        assert got[1][1] == "error: BY option of SORT denied due to insufficient ACL permissions."


def test_auth_hello_requirepass_and_whoami(srv: ServerProcess) -> None:
    admin = srv.client(decode_responses=True)
    admin.execute_command("ACL", "SETUSER", "alice", "on", ">secret", "+@all", "~*")
    alice = as_user(srv, "alice", "secret")
    assert alice.acl_whoami() == "alice"
    assert alice.client_info()["user"] == "alice"
    with pytest.raises(redis.AuthenticationError):
        srv.client(username="alice", password="wrong").ping()
    raw = srv.raw()
    reply = raw.call("HELLO", "3", "AUTH", "alice", "secret")
    assert reply[b"proto"] == 3
    assert raw.call("ACL", "WHOAMI") == b"alice"
    raw.close()
    # requirepass is the default user's password, as Redis 7.0
    admin.config_set("requirepass", "pw0")
    assert admin.acl_getuser("default")["passwords"] == [hashlib.sha256(b"pw0").hexdigest()]
    with pytest.raises(redis.AuthenticationError):
        srv.client().ping()
    assert srv.client(password="pw0").ping()
    assert srv.client(username="default", password="pw0").ping()
    admin.config_set("requirepass", "")
    assert "nopass" in admin.acl_getuser("default")["flags"]
    # a deleted user's clients are closed
    conn = srv.raw()
    assert conn.call("AUTH", "alice", "secret") == "OK"
    assert admin.acl_deluser("alice") == 1
    conn.expect_close()
    conn.close()
    assert all(c["user"] != "alice" for c in admin.client_list())
    alice.close()
    admin.close()


def test_aclfile_save_load_round_trip(srv: ServerProcess) -> None:
    r = srv.client(decode_responses=True)
    aclfile: Path = srv.aclfile  # type: ignore[attr-defined]
    r.execute_command("ACL", "SETUSER", "saved", "on", ">pw", "~s:*", "&c", "-@all", "+@read",
                      "+set")
    before = r.execute_command("ACL", "LIST")
    assert r.execute_command("ACL", "SAVE")
    text = aclfile.read_text()
    assert "user saved on #" + hashlib.sha256(b"pw").hexdigest() in text
    r.execute_command("ACL", "SETUSER", "saved", "off", "+@all")
    r.execute_command("ACL", "SETUSER", "extra", "on")
    assert r.execute_command("ACL", "LOAD")
    assert r.execute_command("ACL", "LIST") == before
    assert as_user(srv, "saved", "pw").set("s:1", "v")
    # a bad file is refused and the users stay as they were
    aclfile.write_text("user bad on +nosuchcommand\n")
    with pytest.raises(redis.ResponseError):
        r.execute_command("ACL", "LOAD")
    assert r.execute_command("ACL", "LIST") == before
    aclfile.write_text("")
    r.close()


def test_acl_log_and_genpass(srv: ServerProcess) -> None:
    r = srv.client(decode_responses=True)
    r.execute_command("ACL", "LOG", "RESET")
    r.execute_command("ACL", "SETUSER", "lg", "on", ">pw", "+get", "~o:*")
    u = as_user(srv, "lg", "pw")
    for _ in range(3):
        with pytest.raises(redis.ResponseError):
            u.get("nope")
    with pytest.raises(redis.ResponseError):
        u.set("o:1", "v")
    # redis-py's CLIENT SETINFO on connecting: a command of Redis 7.2, refused here
    log = [e for e in r.acl_log() if e["object"] != "client|setinfo"]
    assert [(e["reason"], e["object"], e["count"]) for e in log] == [("command", "set", 1),
                                                                      ("key", "nope", 3)]
    assert log[0]["context"] == "toplevel" and log[0]["username"] == "lg"
    assert len(r.acl_genpass()) == 64 and len(r.acl_genpass(5)) == 2
    assert err(r.execute_command, "ACL", "GENPASS", "5000").startswith("ACL GENPASS argument")
    r.execute_command("ACL", "LOG", "RESET")
    r.execute_command("ACL", "DELUSER", "lg")
    u.close()
    r.close()
