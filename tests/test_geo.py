"""Differential tests of the GEO commands: the same commands against stock
redis-server and inreplay (RESP2 and RESP3), replies compared byte for byte
(errors included), and the sorted set beneath compared with ZRANGE WITHSCORES
(the 52-bit geohash scores must be Redis's own).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import test_families
from test_families import Both
from test_replication import attach, expect_stream

if TYPE_CHECKING:
    from conftest import ServerProcess

pair = test_families.pair
both = test_families.both

SICILY = [
    ("13.361389", "38.115556", "Palermo"),
    ("15.087269", "37.502669", "Catania"),
    ("13.583333", "37.316667", "Agrigento"),
    ("12.758489", "38.788135", "edge1"),
    ("17.241510", "38.788135", "edge2"),
]


def seed(b: Both) -> None:
    for lon, lat, name in SICILY:
        b.run("GEOADD", "Sicily", lon, lat, name)
    b.run("GEOADD", "nyc", "-73.9454966", "40.747533", "lic market",
          "-73.9733487", "40.7648057", "central park n/q/r", "-73.9903085", "40.7362513",
          "union square", "-74.0131604", "40.7126674", "wtc one", "-73.7858139", "40.6428986",
          "jfk", "-73.9375699", "40.7498929", "q4",
          "-73.9564142", "40.7480973", "4545")  # fmt: skip
    b.run("SET", "str", "v")


def test_geoadd_scores_are_redis_geohashes(both: Both) -> None:
    seed(both)
    both.run("ZRANGE", "Sicily", "0", "-1", "WITHSCORES")
    both.run("ZRANGE", "nyc", "0", "-1", "WITHSCORES")
    rng = random.Random(7)
    args: list[str] = []
    for i in range(200):
        args += [f"{rng.uniform(-180, 180):.6f}", f"{rng.uniform(-85.05, 85.05):.6f}", f"p{i}"]
    args += ["180", "85.05112878", "corner1", "-180", "-85.05112878", "corner2", "0", "0", "zero"]
    both.run("GEOADD", "rnd", *args)
    both.run("ZRANGE", "rnd", "0", "-1", "WITHSCORES")
    both.run("GEOPOS", "rnd", "corner1", "corner2", "zero", "p1", "nope")
    both.run("GEOHASH", "rnd", "corner1", "corner2", "zero", "p1", "p2", "nope")


def test_geoadd_options_and_errors(both: Both) -> None:
    seed(both)
    both.run_all([
        ("GEOADD", "Sicily", "NX", "13", "38", "Palermo", "14", "39", "new"),
        ("GEOADD", "Sicily", "XX", "13", "38", "Palermo", "14", "39", "new2"),
        ("GEOADD", "Sicily", "XX", "CH", "13.1", "38.1", "Palermo"),
        ("GEOADD", "Sicily", "CH", "NX", "13.1", "38.1", "Palermo"),
        ("GEOADD", "Sicily", "NX", "XX", "13", "38", "x"),
        ("GEOADD", "Sicily", "13", "38"),
        ("GEOADD", "Sicily", "13", "38", "a", "14"),
        ("GEOADD", "Sicily", "GT", "13", "38", "a"),
        ("GEOADD", "Sicily", "181", "38", "bad"),
        ("GEOADD", "Sicily", "13", "86", "bad"),
        ("GEOADD", "Sicily", "-180.1", "-85.06", "bad"),
        ("GEOADD", "Sicily", "abc", "38", "bad"),
        ("GEOADD", "Sicily", "13", "nan", "bad"),
        ("GEOADD", "Sicily", "1", "1", "ok", "200", "1", "bad"),
        ("EXISTS", "bad"), ("ZSCORE", "Sicily", "ok"),
        ("GEOADD", "str", "13", "38", "x"),
        ("GEOADD", "Sicily"),
        ("ZRANGE", "Sicily", "0", "-1", "WITHSCORES"),
    ])  # fmt: skip


def test_geopos_geohash_geodist(both: Both) -> None:
    seed(both)
    both.run_all([
        ("GEOPOS", "Sicily", "Palermo", "Catania", "nope"),
        ("GEOPOS", "Sicily"),
        ("GEOPOS", "nokey", "a", "b"),
        ("GEOPOS", "str", "a"),
        ("GEOHASH", "Sicily", "Palermo", "Catania", "nope"),
        ("GEOHASH", "nokey", "a"),
        ("GEOHASH", "str", "a"),
        ("GEODIST", "Sicily", "Palermo", "Catania"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "km"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "MI"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "ft"),
        ("GEODIST", "Sicily", "Palermo", "Palermo"),
        ("GEODIST", "Sicily", "Palermo", "nope"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "yards"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "km", "x"),
        ("GEODIST", "nokey", "a", "b"),
        ("GEODIST", "str", "a", "b"),
        ("ZADD", "odd", "-5", "neg", "9999999999999999", "big", "4503599627370496", "p52"),
        ("GEOPOS", "odd", "neg", "big", "p52"),
        ("GEOHASH", "odd", "neg", "big", "p52"),
    ])  # fmt: skip


def test_georadius_family(both: Both) -> None:
    seed(both)
    both.run_all([
        ("GEORADIUS", "Sicily", "15", "37", "200", "km"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "ASC"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "DESC", "WITHDIST", "WITHCOORD",
         "WITHHASH"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "2"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "1", "ANY"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "ANY"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "0"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "x"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "parsec"),
        ("GEORADIUS", "Sicily", "15", "37", "-1", "km"),
        ("GEORADIUS", "Sicily", "15", "37", "r", "km"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "bogus"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "out", "WITHDIST"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "out"),
        ("ZRANGE", "out", "0", "-1", "WITHSCORES"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STOREDIST", "outd"),
        ("ZRANGE", "outd", "0", "-1", "WITHSCORES"),
        ("GEORADIUS", "Sicily", "15", "37", "1", "m", "STORE", "out"),
        ("EXISTS", "out"),
        ("GEORADIUS", "nokey", "15", "37", "200", "km", "STORE", "outd"),
        ("EXISTS", "outd"),
        ("GEORADIUS", "nokey", "15", "37", "200", "km"),
        ("GEORADIUS", "str", "15", "37", "200", "km"),
        ("GEORADIUS", "Sicily", "200", "37", "200", "km"),
        ("GEORADIUS_RO", "Sicily", "15", "37", "200", "km", "WITHDIST"),
        ("GEORADIUS_RO", "Sicily", "15", "37", "200", "km", "STORE", "x"),
        ("GEORADIUSBYMEMBER", "Sicily", "Agrigento", "100", "km", "WITHDIST"),
        ("GEORADIUSBYMEMBER", "Sicily", "nope", "100", "km"),
        ("GEORADIUSBYMEMBER", "nokey", "nope", "100", "km"),
        ("GEORADIUSBYMEMBER", "nokey", "nope", "100", "km", "STORE", "x"),
        ("GEORADIUSBYMEMBER_RO", "Sicily", "Palermo", "300", "km", "DESC", "WITHCOORD"),
        ("GEORADIUS", "nyc", "-73.9798091", "40.7598464", "3", "km", "ASC", "WITHDIST"),
        ("GEORADIUS", "nyc", "-73.9798091", "40.7598464", "10", "km", "COUNT", "3", "DESC"),
        ("GEORADIUS", "nyc", "-73.9798091", "40.7598464", "0", "km"),
        ("GEORADIUS", "nyc", "-73.9798091", "40.7598464", "50000", "km"),
    ])  # fmt: skip


def test_geosearch_family(both: Both) -> None:
    seed(both)
    both.run_all([
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYBOX", "400", "400", "km", "DESC",
         "WITHDIST", "WITHCOORD", "WITHHASH"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "200", "200", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "COUNT", "1",
         "ANY"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "FROMMEMBER", "Palermo", "BYRADIUS",
         "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "FROMLONLAT", "15", "37", "BYRADIUS",
         "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "BYBOX", "1",
         "1", "km"),
        ("GEOSEARCH", "Sicily", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "ASC"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "-1", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "w", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "h", "km"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "nope", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "STORE", "x"),
        ("GEOSEARCH", "nokey", "FROMMEMBER", "nope", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "str", "FROMMEMBER", "nope", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ANY"),
        ("GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km"),
        ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400", "400",
         "km", "STOREDIST", "COUNT", "2"),
        ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km",
         "WITHDIST"),
        ("GEOSEARCHSTORE", "Sicily", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS", "100", "km"),
        ("ZRANGE", "Sicily", "0", "-1", "WITHSCORES"),
        ("GEOSEARCHSTORE", "dst", "nokey", "FROMMEMBER", "x", "BYRADIUS", "1", "km"),
        ("EXISTS", "dst"),
        ("GEOSEARCH", "nyc", "FROMLONLAT", "-73.9798091", "40.7598464", "BYBOX", "6", "6", "km",
         "ASC", "WITHDIST"),
    ])  # fmt: skip


def test_geo_random_searches_match(both: Both) -> None:
    rng = random.Random(11)
    args: list[str] = []
    for i in range(400):
        args += [f"{rng.uniform(-20, 20):.6f}", f"{rng.uniform(30, 60):.6f}", f"m{i}"]
    both.run("GEOADD", "pts", *args)
    for _ in range(40):
        lon, lat = f"{rng.uniform(-20, 20):.4f}", f"{rng.uniform(30, 60):.4f}"
        r = str(rng.choice([1, 50, 300, 1000, 3000]))
        both.run("GEORADIUS", "pts", lon, lat, r, "km", "WITHDIST", "ASC")
        both.run("GEOSEARCH", "pts", "FROMLONLAT", lon, lat, "BYBOX", r, r, "km", "ASC",
                 "WITHCOORD")  # fmt: skip


def test_command_info_and_getkeys(both: Both) -> None:
    for name in ("geoadd", "geodist", "geohash", "geopos", "georadius", "georadiusbymember",
                 "georadius_ro", "georadiusbymember_ro", "geosearch", "geosearchstore"):
        a, b = both.replies("COMMAND", "INFO", name)
        # ACL categories and tips are not modelled: compare name, arity, flags, keys, key specs
        assert [a[0][i] for i in (0, 1, 2, 3, 4, 5, 8)] == [b[0][i] for i in (0, 1, 2, 3, 4, 5, 8)]
    both.run("COMMAND", "GETKEYS", "GEORADIUS", "src", "1", "2", "3", "km", "STORE", "dst")
    both.run("COMMAND", "GETKEYS", "GEORADIUSBYMEMBER", "src", "m", "3", "km", "STOREDIST", "d")
    both.run("COMMAND", "GETKEYS", "GEOSEARCHSTORE", "dst", "src", "FROMMEMBER", "m")


def test_geoadd_replicates_as_zadd(server: ServerProcess) -> None:
    c, _ = attach(server)
    r = server.client()
    r.execute_command("GEOADD", "g", "CH", "13.361389", "38.115556", "Palermo")
    r.execute_command("GEOADD", "g", "XX", "1", "1", "nope")
    r.execute_command("GEORADIUS", "g", "13", "38", "100", "km", "STORE", "dst")
    r.close()
    expect_stream(c, [
        "SELECT 0",
        "zadd g CH 3479099956230698 Palermo",
        "GEORADIUS g 13 38 100 km STORE dst",
    ])  # fmt: skip
    c.close()
