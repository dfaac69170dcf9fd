"""Differential tests of the sorted sets: every case runs the same commands
against stock redis-server and inreplay (RESP2 and RESP3) and compares the
replies byte for byte, or as multisets where Redis leaves the order open.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import test_families
from test_families import Both
from test_replication import attach, expect_stream

if TYPE_CHECKING:
    from conftest import ServerProcess

    Pair = tuple[ServerProcess, ServerProcess]

# test_families' fixtures: stock Redis and inreplay flushed (pair), one raw
# connection to each in RESP2 and RESP3 (both)
pair = test_families.pair
both = test_families.both


def seed(b: Both) -> None:
    b.run_all([
        ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"),
        ("ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e", "0", "f", "0", "g"),
        ("ZADD", "w", "1.5", "a", "-inf", "m", "+inf", "x", "0.1", "y", "-2", "n"),
        ("SADD", "s", "a", "b", "q"),
        ("SET", "str", "v"),
    ])  # fmt: skip


def test_zadd_options_and_errors(both: Both) -> None:
    both.run_all([
        ("ZADD", "z", "1", "a"),
        ("ZADD", "z", "1", "a", "2", "b"),
        ("ZADD", "z", "CH", "5", "a", "2", "b", "3", "c"),
        ("ZADD", "z", "NX", "10", "a", "10", "n"),
        ("ZADD", "z", "XX", "11", "a", "11", "x"),
        ("ZADD", "z", "XX", "CH", "12", "a", "11", "x"),
        ("ZADD", "z", "GT", "CH", "1", "a", "20", "b"),
        ("ZADD", "z", "LT", "CH", "1", "a", "30", "c"),
        ("ZADD", "z", "INCR", "2.5", "a"),
        ("ZADD", "z", "INCR", "NX", "2.5", "a"),
        ("ZADD", "z", "INCR", "XX", "2.5", "nope"),
        ("ZADD", "z", "INCR", "GT", "-1", "a"),
        ("ZADD", "z", "NX", "XX", "1", "a"),
        ("ZADD", "z", "GT", "LT", "1", "a"),
        ("ZADD", "z", "GT", "NX", "1", "a"),
        ("ZADD", "z", "INCR", "1", "a", "2", "b"),
        ("ZADD", "z", "1"),
        ("ZADD", "z", "1", "a", "2"),
        ("ZADD", "z", "nan", "a"),
        ("ZADD", "z", "abc", "a"),
        ("ZADD", "z", " 1", "a"),
        ("ZADD", "z", "XX", "1", "a", "bad", "b"),
        ("ZADD", "z", "inf", "i"),
        ("ZADD", "z", "INCR", "-inf", "i"),
        ("ZADD", "z", "1e400", "big"),
        ("ZADD", "z", str(2**1024 - 2**971) + ".000", "dblmax"), ("ZSCORE", "z", "dblmax"),
        ("ZADD", "z", "1", "a", "2" * 400, "b"), ("ZUNION", "1", "z", "WEIGHTS", "1" * 320),
        ("ZADD", "nokey", "XX", "1", "a"),
        ("EXISTS", "nokey"),
        ("ZADD", "nokey", "XX", "INCR", "1", "a"),
        ("ZADD", "str", "1", "a"),
        ("ZADD", "z"),
        ("ZINCRBY", "z", "1.5", "a"),
        ("ZINCRBY", "z", "1", "new"),
        ("ZINCRBY", "z", "x", "a"),
        ("ZINCRBY", "str", "1", "a"),
        ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        ("ZADD", "f", "1.1", "a", "0.1", "b", "-0", "c", "1e20", "d", "123456789012345678", "e"),
        ("ZRANGE", "f", "0", "-1", "WITHSCORES"),
        ("ZSCORE", "f", "a"),
        ("ZINCRBY", "f", "0.2", "b"),
        ("TYPE", "f"),
    ])  # fmt: skip


def test_zadd_incr_nan(both: Both) -> None:
    both.run_all([
        ("ZADD", "z", "inf", "a"),
        ("ZADD", "z", "INCR", "-inf", "a"),
        ("ZINCRBY", "z", "-inf", "a"),
        ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
    ])  # fmt: skip


def test_read_commands(both: Both) -> None:
    seed(both)
    both.run_all([
        ("ZCARD", "z"), ("ZCARD", "nokey"), ("ZCARD", "str"),
        ("ZSCORE", "z", "c"), ("ZSCORE", "z", "nope"), ("ZSCORE", "nokey", "a"),
        ("ZSCORE", "str", "a"), ("ZSCORE", "w", "m"), ("ZSCORE", "w", "x"),
        ("ZMSCORE", "z", "a", "nope", "e"), ("ZMSCORE", "nokey", "a", "b"),
        ("ZMSCORE", "str", "a"), ("ZMSCORE", "z"),
        ("ZRANK", "z", "a"), ("ZRANK", "z", "e"), ("ZRANK", "z", "nope"),
        ("ZRANK", "nokey", "a"), ("ZREVRANK", "z", "a"), ("ZREVRANK", "z", "e"),
        ("ZREVRANK", "w", "m"), ("ZRANK", "str", "a"), ("ZRANK", "z", "a", "WITHSCORE"),
        ("ZCOUNT", "z", "2", "4"), ("ZCOUNT", "z", "(2", "(4"), ("ZCOUNT", "z", "-inf", "+inf"),
        ("ZCOUNT", "z", "5", "1"), ("ZCOUNT", "z", "x", "1"), ("ZCOUNT", "z", "(", "1"),
        ("ZCOUNT", "nokey", "0", "1"), ("ZCOUNT", "z", "nan", "1"), ("ZCOUNT", "w", "-inf", "(inf"),
        ("ZCOUNT", "z", "", "3"),
        ("ZLEXCOUNT", "lex", "-", "+"), ("ZLEXCOUNT", "lex", "[b", "(f"),
        ("ZLEXCOUNT", "lex", "(b", "[f"), ("ZLEXCOUNT", "lex", "[f", "[b"),
        ("ZLEXCOUNT", "lex", "b", "f"), ("ZLEXCOUNT", "lex", "+", "-"),
        ("ZLEXCOUNT", "lex", "[", "+"), ("ZLEXCOUNT", "nokey", "-", "+"),
        ("ZLEXCOUNT", "lex", "-x", "+"),
    ])  # fmt: skip


def test_zrange_family(both: Both) -> None:
    seed(both)
    both.run_all([
        ("ZRANGE", "z", "0", "-1"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        ("ZRANGE", "z", "1", "2"), ("ZRANGE", "z", "-2", "-1"), ("ZRANGE", "z", "3", "1"),
        ("ZRANGE", "z", "10", "20"), ("ZRANGE", "z", "-100", "100"),
        ("ZRANGE", "z", "0", "-1", "REV"), ("ZRANGE", "z", "0", "1", "REV", "WITHSCORES"),
        ("ZRANGE", "z", "2", "4", "BYSCORE"),
        ("ZRANGE", "z", "(2", "+inf", "BYSCORE", "WITHSCORES"),
        ("ZRANGE", "z", "4", "2", "BYSCORE", "REV"),
        ("ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "2"),
        ("ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "-1"),
        ("ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "-1", "2"),
        ("ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "0", "0"),
        ("ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "2", "WITHSCORES"),
        ("ZRANGE", "lex", "[b", "(f", "BYLEX"),
        ("ZRANGE", "lex", "-", "+", "BYLEX", "LIMIT", "2", "3"),
        ("ZRANGE", "lex", "+", "-", "BYLEX", "REV"), ("ZRANGE", "lex", "(f", "[b", "BYLEX", "REV"),
        ("ZRANGE", "lex", "-", "+", "BYLEX", "WITHSCORES"),
        ("ZRANGE", "z", "0", "1", "LIMIT", "0", "1"),
        ("ZRANGE", "z", "0", "1", "BYSCORE", "BYLEX"), ("ZRANGE", "z", "0", "1", "REV", "REV"),
        ("ZRANGE", "z", "a", "1"), ("ZRANGE", "z", "x", "1", "BYSCORE"),
        ("ZRANGE", "lex", "x", "+", "BYLEX"), ("ZRANGE", "z", "0", "1", "LIMIT", "0"),
        ("ZRANGE", "z", "0", "1", "BYSCORE", "LIMIT", "a", "1"),
        ("ZRANGE", "nokey", "0", "-1"), ("ZRANGE", "str", "0", "-1"), ("ZRANGE", "z", "0"),
        ("ZREVRANGE", "z", "0", "-1"), ("ZREVRANGE", "z", "0", "2", "WITHSCORES"),
        ("ZREVRANGE", "z", "0", "2", "BYSCORE"),
        ("ZRANGEBYSCORE", "z", "2", "4"), ("ZRANGEBYSCORE", "z", "-inf", "inf", "WITHSCORES"),
        ("ZRANGEBYSCORE", "z", "-inf", "inf", "LIMIT", "1", "2", "WITHSCORES"),
        ("ZRANGEBYSCORE", "z", "(1", "(5"), ("ZRANGEBYSCORE", "z", "x", "(5"),
        ("ZRANGEBYSCORE", "z", "0", "1", "REV"),
        ("ZREVRANGEBYSCORE", "z", "4", "2"),
        ("ZREVRANGEBYSCORE", "z", "+inf", "-inf", "WITHSCORES"),
        ("ZREVRANGEBYSCORE", "z", "+inf", "-inf", "LIMIT", "1", "1"),
        ("ZRANGEBYSCORE", "w", "-inf", "+inf", "WITHSCORES"),
        ("ZRANGEBYLEX", "lex", "-", "[c"), ("ZRANGEBYLEX", "lex", "(a", "+", "LIMIT", "1", "2"),
        ("ZRANGEBYLEX", "lex", "a", "+"), ("ZRANGEBYLEX", "lex", "-", "+", "WITHSCORES"),
        ("ZREVRANGEBYLEX", "lex", "+", "-"),
        ("ZREVRANGEBYLEX", "lex", "[e", "(b", "LIMIT", "0", "2"),
    ])  # fmt: skip


def test_zrangestore(both: Both) -> None:
    seed(both)
    both.run_all([
        ("ZRANGESTORE", "d", "z", "0", "2"), ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
        ("ZRANGESTORE", "d", "z", "(2", "+inf", "BYSCORE", "LIMIT", "0", "2"),
        ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
        ("ZRANGESTORE", "d", "lex", "[b", "[d", "BYLEX", "REV"), ("ZRANGE", "d", "0", "-1"),
        ("ZRANGESTORE", "d", "z", "10", "20"), ("EXISTS", "d"),
        ("ZRANGESTORE", "str", "z", "0", "0"), ("TYPE", "str"),
        ("ZRANGESTORE", "d", "nokey", "0", "-1"),
        ("ZRANGESTORE", "d", "str", "0", "-1"),
        ("ZRANGESTORE", "d", "z", "0", "-1", "WITHSCORES"),
        ("ZRANGESTORE", "z", "z", "1", "2"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        ("OBJECT", "ENCODING", "z"),
    ])  # fmt: skip


def test_zrem_and_zremrange(both: Both) -> None:
    seed(both)
    both.run_all([
        ("ZREM", "z", "a", "nope"), ("ZREM", "z", "nope"), ("ZREM", "nokey", "a"),
        ("ZREM", "str", "a"),
        ("ZREMRANGEBYRANK", "z", "0", "0"), ("ZRANGE", "z", "0", "-1"),
        ("ZREMRANGEBYRANK", "z", "5", "10"), ("ZREMRANGEBYRANK", "z", "x", "1"),
        ("ZREMRANGEBYSCORE", "z", "(3", "4"), ("ZRANGE", "z", "0", "-1"),
        ("ZREMRANGEBYSCORE", "z", "x", "4"), ("ZREMRANGEBYSCORE", "nokey", "0", "1"),
        ("ZREMRANGEBYLEX", "lex", "[b", "(e"), ("ZRANGE", "lex", "0", "-1"),
        ("ZREMRANGEBYLEX", "lex", "b", "e"),
        ("ZREMRANGEBYLEX", "lex", "-", "+"), ("EXISTS", "lex"),
        ("ZREMRANGEBYRANK", "w", "0", "-1"), ("EXISTS", "w"),
        ("ZREM", "z", "c", "e"), ("EXISTS", "z"),
    ])  # fmt: skip


def test_zpop_and_zmpop(both: Both) -> None:
    seed(both)
    both.run_all([
        ("ZPOPMIN", "z"), ("ZPOPMAX", "z"), ("ZPOPMIN", "z", "0"), ("ZPOPMIN", "z", "2"),
        ("ZPOPMAX", "nokey"), ("ZPOPMAX", "nokey", "2"), ("ZPOPMIN", "z", "-1"),
        ("ZPOPMIN", "z", "x"), ("ZPOPMIN", "z", "1", "2"), ("ZPOPMIN", "str"),
        ("ZPOPMAX", "z", "10"), ("EXISTS", "z"),
        ("ZMPOP", "2", "nokey", "w", "MIN"), ("ZMPOP", "2", "nokey", "w", "MAX", "COUNT", "2"),
        ("ZMPOP", "1", "nokey", "MIN"), ("ZMPOP", "0", "w", "MIN"), ("ZMPOP", "x", "w", "MIN"),
        ("ZMPOP", "1", "w", "MID"),
        ("ZMPOP", "3", "w", "MIN"), ("ZMPOP", "1", "w", "MIN", "COUNT", "0"),
        ("ZMPOP", "1", "w", "MIN", "COUNT", "1", "COUNT", "1"), ("ZMPOP", "1", "w", "MIN", "COUNT"),
        ("ZMPOP", "2", "str", "w", "MIN"), ("ZMPOP", "1", "w", "MAX", "COUNT", "100"),
        ("EXISTS", "w"),
    ])  # fmt: skip


def test_setops(both: Both) -> None:
    seed(both)
    both.run_all([
        ("ZADD", "z2", "10", "a", "20", "c", "30", "q"),
        ("ZUNION", "2", "z", "z2"), ("ZUNION", "2", "z", "z2", "WITHSCORES"),
        ("ZUNION", "3", "z", "z2", "s", "WEIGHTS", "1", "2", "3", "WITHSCORES"),
        ("ZUNION", "2", "z", "z2", "AGGREGATE", "MIN", "WITHSCORES"),
        ("ZUNION", "2", "z", "z2", "AGGREGATE", "MAX", "WITHSCORES"),
        ("ZUNION", "2", "z", "w", "WEIGHTS", "0", "0", "WITHSCORES"),
        ("ZINTER", "2", "z", "z2", "WITHSCORES"), ("ZINTER", "3", "z", "z2", "s", "WITHSCORES"),
        ("ZINTER", "2", "z", "nokey"), ("ZINTER", "2", "z", "z2", "AGGREGATE", "MAX"),
        ("ZDIFF", "2", "z", "z2"), ("ZDIFF", "2", "z", "z2", "WITHSCORES"),
        ("ZDIFF", "1", "nokey"), ("ZDIFF", "2", "z", "z2", "WEIGHTS", "1", "1"),
        ("ZINTERCARD", "2", "z", "z2"), ("ZINTERCARD", "2", "z", "z2", "LIMIT", "1"),
        ("ZINTERCARD", "2", "z", "z2", "LIMIT", "-1"), ("ZINTERCARD", "0", "z"),
        ("ZINTERCARD", "2", "z", "z2", "WITHSCORES"),
        ("ZUNION", "0", "z"), ("ZUNION", "-1", "z"),
        ("ZUNION", "x", "z"), ("ZUNION", "3", "z", "z2"),
        ("ZUNION", "2", "z", "str"), ("ZUNION", "2", "z", "z2", "WEIGHTS", "1", "x"),
        ("ZUNION", "2", "z", "z2", "WEIGHTS", "1"), ("ZUNION", "2", "z", "z2", "AGGREGATE", "AVG"),
        ("ZUNIONSTORE", "d", "2", "z", "z2"), ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
        ("ZUNIONSTORE", "d", "2", "z", "z2", "WITHSCORES"),
        ("ZINTERSTORE", "d", "2", "z", "z2", "WEIGHTS", "2", "3"),
        ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
        ("ZDIFFSTORE", "d", "2", "z", "z2"), ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
        ("ZINTERSTORE", "d", "2", "z", "nokey"), ("EXISTS", "d"),
        ("ZUNIONSTORE", "z", "2", "z", "z2"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        ("ZUNIONSTORE", "d", "0", "z"), ("ZINTERSTORE", "d", "1", "str"),
        ("ZDIFFSTORE", "d", "1", "z", "AGGREGATE", "SUM"),
        ("ZUNIONSTORE", "str", "1", "s"), ("TYPE", "str"), ("OBJECT", "ENCODING", "str"),
    ])  # fmt: skip


def test_zrandmember_and_zscan(both: Both) -> None:
    seed(both)
    both.run_all([
        ("ZRANDMEMBER", "nokey"), ("ZRANDMEMBER", "nokey", "3"), ("ZRANDMEMBER", "str"),
        ("ZRANDMEMBER", "z", "0"), ("ZRANDMEMBER", "z", "x"), ("ZRANDMEMBER", "z", "1", "x"),
        ("ZRANDMEMBER", "z", "-9223372036854775808"),
        ("ZRANDMEMBER", "z", "-9223372036854775807", "WITHSCORES"),
        ("ZSCAN", "z", "0"), ("ZSCAN", "w", "0"), ("ZSCAN", "z", "0", "MATCH", "[ab]"),
        ("ZSCAN", "nokey", "0"), ("ZSCAN", "str", "0"), ("ZSCAN", "z", "x"),
    ])  # fmt: skip
    for cmd in [("ZRANDMEMBER", "z", "5"), ("ZRANDMEMBER", "z", "10", "WITHSCORES")]:
        both.same_set(*cmd)
    for cmd in [("ZRANDMEMBER", "z", "3"), ("ZRANDMEMBER", "z", "-8", "WITHSCORES")]:
        a, b = both.replies(*cmd)
        assert len(a) == len(b)
    got = both.replies("ZRANDMEMBER", "z")
    assert all(x in (b"a", b"b", b"c", b"d", b"e") for x in got)


def test_encodings_copy_digest(both: Both) -> None:
    both.run_all([
        ("ZADD", "small", "1", "a", "2", "b"),
        ("OBJECT", "ENCODING", "small"),
        ("ZADD", "long", "1", "x" * 65),
        ("OBJECT", "ENCODING", "long"),
        ("CONFIG", "SET", "zset-max-listpack-entries", "2"),
        ("ZADD", "small", "3", "c"),
        ("OBJECT", "ENCODING", "small"),
        ("ZREM", "small", "c"),
        ("OBJECT", "ENCODING", "small"),
        ("ZADD", "three", "1", "a", "2", "b", "3", "c"),
        ("OBJECT", "ENCODING", "three"),
        ("COPY", "small", "small2"),
        ("OBJECT", "ENCODING", "small2"),
        ("ZRANGE", "small2", "0", "-1", "WITHSCORES"),
        ("ZUNIONSTORE", "u", "1", "small"),
        ("OBJECT", "ENCODING", "u"),
        ("CONFIG", "SET", "zset-max-listpack-entries", "128"),
        ("TYPE", "small"),
        ("MOVE", "small", "1"),
        ("SELECT", "1"),
        ("ZRANGE", "small", "0", "-1", "WITHSCORES"),
        ("SELECT", "0"),
        ("OBJECT", "REFCOUNT", "three"),
    ])  # fmt: skip
    a, b = both.replies("SCAN", "0", "TYPE", "zset")
    assert sorted(a[1]) == sorted(b[1]) and len(a[1]) == 4
    for c in both.conns:
        d1 = c.call("DEBUG", "DIGEST-VALUE", "three")
        c.call("COPY", "three", "three2")
        assert c.call("DEBUG", "DIGEST-VALUE", "three2") == d1
        c.call("ZINCRBY", "three2", "1", "a")
        assert c.call("DEBUG", "DIGEST-VALUE", "three2") != d1


def test_dump_restore_across_servers(both: Both) -> None:
    """A skiplist set dumps to Redis's exact bytes (ZSET_2, greatest first);
    every set's DUMP restores on the other server and back."""
    big = [x for i in range(200) for x in (str(i * 1.5 - 7), f"m{i}")]
    both.run_all([
        ("ZADD", "big", *big), ("ZADD", "small", "1.5", "a", "-inf", "b", "inf", "c", "2", "d"),
    ])  # fmt: skip
    both.run("DUMP", "big")
    ref, ours = both.conns
    payload = ours.call("DUMP", "small")
    assert ref.call("RESTORE", "fromours", "0", payload) == "OK"
    assert ref.call("ZRANGE", "fromours", "0", "-1", "WITHSCORES") == ref.call(
        "ZRANGE", "small", "0", "-1", "WITHSCORES"
    )
    theirs = ref.call("DUMP", "big")
    assert ours.call("RESTORE", "fromredis", "0", theirs) == "OK"
    both.run_all([
        ("RESTORE", "big2", "0", theirs), ("ZRANGE", "big2", "0", "-1", "WITHSCORES"),
        ("OBJECT", "ENCODING", "big2"), ("ZRANK", "big2", "m150"),
    ])  # fmt: skip
    assert ours.call("RESTORE", "small2", "0", payload) == "OK"
    assert ours.call("OBJECT", "ENCODING", "small2") == b"listpack"
    assert ours.call("DEBUG", "DIGEST-VALUE", "small2") == ours.call(
        "DEBUG", "DIGEST-VALUE", "small"
    )


def test_command_table_and_getkeys(both: Both) -> None:
    keys = [f"k{i}" for i in range(260)]
    names = ["zunionstore", "zadd", "zrangestore", "zmpop", "zintercard", "zrange", "zpopmin"]
    a, b = both.replies("COMMAND", "INFO", *names)
    for x, y in zip(a, b, strict=True):  # name, arity, flags, first, last, step; key specs
        assert [*x[:2], sorted(x[2]), *x[3:6]] == [*y[:2], sorted(y[2]), *y[3:6]]
        assert x[8] == y[8]
    both.run_all([
        ("COMMAND", "GETKEYS", "ZUNIONSTORE", "dst", "2", "a", "b", "WEIGHTS", "1", "2"),
        ("COMMAND", "GETKEYS", "ZUNIONSTORE", "dst", str(len(keys)), *keys),
        ("COMMAND", "GETKEYS", "ZMPOP", "2", "a", "b", "MIN"),
        ("COMMAND", "GETKEYS", "ZRANGESTORE", "d", "s", "0", "1"),
        ("COMMAND", "GETKEYS", "ZINTER", "2", "a", "b"),
        ("ZADD", "z"), ("ZUNIONSTORE", "d", "1"), ("ZRANGESTORE", "d", "s", "0"),
        ("ZMPOP", "1", "z"),
    ])  # fmt: skip


def test_writes_propagate_as_redis_does(server: ServerProcess) -> None:
    """Replicas get what changed the dataset, as called; ZMPOP as ZPOPMIN/ZPOPMAX."""
    commands = [
        "zadd z 1 a 2 b 3 c 4 d 5 e",
        "zadd z xx 1 nope",
        "zadd z 1 a",
        "zadd z incr 2 a",
        "zincrby z 1 b",
        "zrem z nope",
        "zrem z c",
        "zremrangebyscore z 100 200",
        "zremrangebyrank z 0 0",
        "zpopmin nokey",
        "zpopmax z",
        "zmpop 2 nokey z min count 7",
        "zadd y 1 a 2 b",
        "zmpop 1 y max",
        "zadd y2 1 a",
        "bzpopmin y2 0",
        "zadd y3 1 a 2 b",
        "bzmpop 0 1 y3 max count 10",
        "zunionstore u 1 y",
        "zinterstore none 2 y nokey",
        "zrangestore r y 0 0",
        "zdiffstore dd 1 y",
        "zrange y 0 -1",
    ]
    c, _ = attach(server)
    r = server.client()
    for cmd in commands:
        r.execute_command(*cmd.split())
    r.close()
    expect_stream(c, [
        "SELECT 0",
        "zadd z 1 a 2 b 3 c 4 d 5 e",
        "zadd z incr 2 a",
        "zincrby z 1 b",
        "zrem z c",
        "zremrangebyrank z 0 0",
        "zpopmax z",
        "ZPOPMIN z 2",
        "zadd y 1 a 2 b",
        "ZPOPMAX y 1",
        "zadd y2 1 a",
        "ZPOPMIN y2",
        "zadd y3 1 a 2 b",
        "ZPOPMAX y3 2",
        "zunionstore u 1 y",
        "zrangestore r y 0 0",
        "zdiffstore dd 1 y",
    ])  # fmt: skip
    c.close()


def test_blocking_pops(both: Both, pair: Pair) -> None:
    seed(both)
    both.run_all([
        ("BZPOPMIN", "nokey", "z", "0"), ("BZPOPMAX", "z", "0.01"), ("BZPOPMIN", "nokey", "0.01"),
        ("BZPOPMIN", "z", "x"), ("BZPOPMIN", "z", "-1"), ("BZPOPMIN", "str", "0"),
        ("BZMPOP", "0", "2", "nokey", "w", "MAX", "COUNT", "2"),
        ("BZMPOP", "0.01", "1", "no", "MIN"),
        ("BZMPOP", "x", "1", "w", "MIN"), ("BZMPOP", "0", "0", "w", "MIN"),
        ("BZMPOP", "0", "1", "w", "MID"), ("BZMPOP", "0", "1", "str", "MIN"),
        ("MULTI",), ("BZPOPMIN", "nokey", "0"), ("BZMPOP", "0", "1", "nokey", "MAX"), ("EXEC",),
    ])  # fmt: skip
    # a waiter is served by the ZADD that creates the key, in one reply
    for srv in pair:
        with srv.raw() as waiter, srv.raw() as other:
            waiter.send(waiter.command("BZPOPMAX", "q1", "q2", "5"))
            deadline = time.monotonic() + 5
            while other.call("INFO", "clients").find(b"blocked_clients:1") < 0:
                assert time.monotonic() < deadline, f"{srv}: BZPOPMAX did not block"
                time.sleep(0.01)
            assert other.call("ZADD", "q2", "1", "a", "2", "b") == 2
            assert waiter.read_reply() == [b"q2", b"b", b"2"]
            waiter.send(waiter.command("BZMPOP", "5", "1", "q3", "MIN", "COUNT", "5"))
            while other.call("INFO", "clients").find(b"blocked_clients:1") < 0:
                time.sleep(0.01)
            assert other.call("ZUNIONSTORE", "q3", "1", "q2") == 1
            assert waiter.read_reply() == [b"q3", [[b"a", b"1"]]]
            assert other.call("EXISTS", "q3") == 0


def test_debug_reload_keeps_sorted_sets(both: Both) -> None:
    """A snapshot saves and loads sorted sets (scores exact, encodings as Redis loads them)."""
    big = [x for i in range(150) for x in (str(i / 3), f"m{i}")]
    both.run_all([
        ("ZADD", "small", "1.1", "a", "-inf", "b", "inf", "c", "0.30000000000000004", "d"),
        ("ZADD", "big", *big), ("ZADD", "long", "1", "x" * 100), ("PEXPIRE", "small", "100000"),
        ("DEBUG", "RELOAD"),
        ("ZRANGE", "small", "0", "-1", "WITHSCORES"), ("ZRANGE", "big", "0", "-1", "WITHSCORES"),
        ("OBJECT", "ENCODING", "small"), ("OBJECT", "ENCODING", "big"),
        ("OBJECT", "ENCODING", "long"), ("ZRANK", "big", "m77"), ("TYPE", "long"),
    ])  # fmt: skip
    a, b = both.replies("PTTL", "small")
    assert 0 < a <= 100000 and 0 < b <= 100000


def test_sort_reads_sorted_sets(both: Both) -> None:
    both.run_all([
        ("ZADD", "z", "3", "c", "1", "10", "2", "2", "0", "x"),
        ("SORT", "z", "ALPHA"), ("SORT", "z", "BY", "nosort"),
        ("SORT", "z", "BY", "nosort", "DESC"),
        ("SORT", "z", "BY", "nosort", "LIMIT", "1", "2"), ("ZREM", "z", "c", "x"), ("SORT", "z"),
        ("SORT", "z", "BY", "nosort", "STORE", "dst"), ("LRANGE", "dst", "0", "-1"),
        ("SORT_RO", "z", "DESC"),
    ])  # fmt: skip
