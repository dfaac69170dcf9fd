"""REPLAY.* errors carry a code: every code in
fstack_redis/replay_err.h comes from the real server on each path that emits it,
pyctl.errors maps it to its class, REPLAY.INFO decodes through one table of field
types, and no Python module reads an error's wording."""
from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import redis

from pyctl import errors
from pyctl.client import ReplayClient
from pyctl.trajectory import create_trajectory_table

if TYPE_CHECKING:
    from conftest import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "fstack_redis" / "replay_err.h"


def header_codes() -> dict[str, str]:
    """The X(code, when) list of replay_err.h: code -> when."""
    text = HEADER.read_text()
    body = text[text.index("#define IR_REPLAY_ERRORS(X)"):text.index("typedef enum")]
    return dict(re.findall(r'X\((\w+),\s*"([^"]*)"\)', body))


@pytest.fixture
def r(replay_server: ServerProcess) -> Iterator[redis.Redis]:
    c = replay_server.client()
    for t in c.execute_command("REPLAY.LIST"):
        c.execute_command("REPLAY.DROP", t)
    for t in ("pstale", "psync"):
        try:
            c.execute_command("PARAM.DROP", t)
        except redis.ResponseError:
            pass
    yield c
    c.close()


def fails(r: redis.Redis, *args: Any) -> redis.ResponseError:
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    return e.value


def setup_tables(r: redis.Redis) -> list[Any]:
    """Tables for every path; returns a good REPLAY.ITEM item."""
    r.execute_command("REPLAY.CREATE", "plain", "CAPACITY", 10)
    r.execute_command("REPLAY.CREATE", "lim", "CAPACITY", 10, "MIN_SIZE", 5)
    r.execute_command("REPLAY.CREATE", "mixed", "CAPACITY", 10)
    r.execute_command("REPLAY.ADD", "mixed", 1, b"a" * 8, 1, b"b" * 16)
    create_trajectory_table(r, "tt", 100)
    create_trajectory_table(r, "tt_empty", 100)
    r.execute_command("REPLAY.STREAM", "s", "FIELDS", 2, "obs", "uint8", "4,3", "r", "float32",
                      "", "CHUNK", 4, "HISTORY", 8)
    r.execute_command("REPLAY.APPEND", "s", 20, np.zeros((20, 4, 3), np.uint8).tobytes(),
                      np.zeros(20, np.float32).tobytes())
    r.execute_command("PARAM.CREATE", "pstale", "SIZE", 2, "OPTIMIZER", "sgd")
    for _ in range(3):
        r.execute_command("PARAM.PUSH", "pstale", bytes(8))
    r.execute_command("PARAM.CREATE", "psync", "SIZE", 2, "OPTIMIZER", "sgd", "SYNC", 2)
    return ["1.0", 2, "o", "s", "obs", 15, 3, "rw", "s", "r", 17, 1]


def paths(good: list[Any]) -> dict[str, list[tuple[Any, ...]]]:
    """Every REPLAY command path that emits each code."""
    bad_prio = ["-1", *good[1:]]
    return {
        "RATELIMITED": [("REPLAY.SAMPLE", "lim", 1)],
        "NOTABLE": [("REPLAY.SAMPLE", "nope", 1), ("REPLAY.INFO", "nope"),
                    ("REPLAY.DROP", "nope"), ("REPLAY.ADD", "nope", 1, b"x"),
                    ("REPLAY.ITEM", "nope", *good), ("REPLAY.COLUMNS", "nope")],
        "BUSYTABLE": [("REPLAY.CREATE", "plain", "CAPACITY", 10)],
        "EMPTY": [("REPLAY.SAMPLE", "plain", 1), ("REPLAY.SAMPLE", "tt_empty", 1)],
        "BADPRIO": [("REPLAY.ADD", "plain", 1, b"x", "high", b"y"),
                    ("REPLAY.ITEM", "tt", *good, *bad_prio)],
        "MIXEDSIZE": [("REPLAY.SAMPLE", "mixed", 1, "PACKED")],
        "WRONGKIND": [("REPLAY.ADD", "tt", 1, b"x"), ("REPLAY.ITEM", "plain", *good),
                      ("REPLAY.SAMPLE", "tt", 1, "PACKED"), ("REPLAY.COLUMNS", "plain")],
        "NOSTREAM": [("REPLAY.APPEND", "nope", 1, b"x", b"y"),
                     ("REPLAY.ITEM", "tt", *good[:3], "x", *good[4:])],
        "STALE": [("PARAM.PUSH", "pstale", bytes(8), "BASE", 1, "MAXSTALE", 1)],
        "SYNCTIMEOUT": [("PARAM.PUSH", "psync", bytes(8), "TIMEOUT", "0.01")],
    }


def test_header_and_decoder_agree() -> None:
    codes = header_codes()
    assert len(codes) >= 8, codes
    assert set(codes) == set(errors.CLASSES), "replay_err.h and pyctl/errors.py differ"
    for code, cls in errors.CLASSES.items():
        assert issubclass(cls, redis.ResponseError) and cls.code == code


def test_every_path_replies_with_its_code(r: redis.Redis) -> None:
    good = setup_tables(r)
    for code, cmds in paths(good).items():
        for args in cmds:
            e = fails(r, *args)
            assert errors.code_of(e) == code, (args[:2], str(e))
            decoded = errors.replay_error(e)
            assert type(decoded) is errors.CLASSES[code], (args[:2], str(e))
            assert isinstance(decoded, redis.ResponseError)
            assert str(decoded) == str(e) and errors.message(e), str(e)
    # INFO errorstats counts them by code, as Redis counts WRONGTYPE
    stats = r.info("errorstats")
    for code in paths(good):
        assert stats.get(f"errorstat_{code}", {}).get("count", 0) >= 1, (code, stats)
    # the batches were refused whole
    assert errors.decode_info(r.execute_command("REPLAY.INFO", "plain"))["size"] == 0
    assert errors.decode_info(r.execute_command("REPLAY.INFO", "tt"))["size"] == 0


def test_codes_cover_every_path_in_the_source() -> None:
    """Each code is used by the C side, and each is driven above."""
    used = set()
    for c in (ROOT / "fstack_redis").glob("*.c"):
        used |= set(re.findall(r"replyReplayError\(c, IR_ERR_(\w+)", c.read_text()))
    assert used == set(header_codes()), used ^ set(header_codes())
    assert set(paths(["1", 1, "o", "s", "obs", 0, 1])) == used


def test_bad_priority_names_its_index(r: redis.Redis) -> None:
    r.execute_command("REPLAY.CREATE", "t", "CAPACITY", 10)
    e = errors.replay_error(fails(r, "REPLAY.ADD", "t", 1, b"a", 2, b"b", "nan", b"c"))
    assert isinstance(e, errors.BadPriorityError) and e.index == 2, str(e)
    assert str(e) == "BADPRIO 2 invalid priority 'nan': use a finite number >= 0 or MAX"


def test_client_raises_the_classes(replay_server: ServerProcess) -> None:
    rc = ReplayClient(host=replay_server.host, port=replay_server.port)
    try:
        for t in rc.tables():
            rc.drop(t)
        rc.create("c", capacity=10, min_size=2)
        with pytest.raises(errors.TableExistsError):
            rc.create("c", capacity=10)
        with pytest.raises(errors.RateLimited) as lim:
            rc.sample("c", 1)
        assert lim.value.reason.startswith("table 'c' has 0 items, MIN_SIZE is 2")
        with pytest.raises(errors.NoSuchTableError):
            rc.info("nope")
        with pytest.raises(errors.NoSuchTableError):
            rc.drop("nope")
        rc.create("e", capacity=10)
        with pytest.raises(errors.EmptyTableError):
            rc.sample("e", 1)
        with pytest.raises(errors.EmptyTableError):
            rc.sample("e", 1, item_shape=(4,))
        # the raw command (no client-side check of priorities): the server's index
        with pytest.raises(redis.ResponseError) as bad:
            rc.redis.execute_command("REPLAY.ADD", "e", 1, b"a", "-3", b"b")
        decoded = errors.replay_error(bad.value)
        assert isinstance(decoded, errors.BadPriorityError) and decoded.index == 1
    finally:
        rc.close()


def test_where_keeps_the_code_first() -> None:
    e = errors.where(redis.ResponseError("BADPRIO 3 invalid priority 'x': use ..."), 1, "h:1")
    assert isinstance(e, errors.BadPriorityError) and e.index == 3
    assert str(e).endswith("(shard 1, h:1)")
    plain = errors.where(redis.ResponseError("wrong number of arguments"), 0, "h:0")
    assert type(plain) is redis.ResponseError and str(plain).startswith("shard 0 (h:0): ")
    assert errors.code_of(ValueError("RATELIMITED x")) == ""


def test_decode_info_types_every_field(r: redis.Redis) -> None:
    setup_tables(r)
    for table in ("plain", "tt"):
        raw = r.execute_command("REPLAY.INFO", table)
        names = [k.decode() for k in raw[::2]]
        assert set(names) <= set(errors.INFO_FIELDS), set(names) - set(errors.INFO_FIELDS)
        d = errors.decode_info(raw)
        for k, v in d.items():
            assert type(v) is errors.INFO_FIELDS[k], (k, v)
        assert d["name"] == table and d["capacity"] in (10, 100)
    assert errors.decode_info({b"size": 3, b"alpha": 0.5, b"new": b"x"}) == {
        "size": 3, "alpha": 0.5, "new": "x"}


# ---- no Python module reads an error's wording ------------------------------------

SCANNED = ("pyctl", "rl", "actors", "learner", "integrations", "bench")
TEXT_METHODS = {"startswith", "endswith", "find", "index", "split", "rsplit", "partition",
                "replace", "removeprefix", "count"}
CODE_WORDS = set(header_codes())
WORDING = ("no such table", "is empty", "invalid priority", "already exists",
           "PACKED needs", "no such stream", "holds trajectories", "holds opaque")


REPLY_ERRORS = {"ResponseError", "RedisError", *(c.__name__ for c in errors.CLASSES.values())}


def _catches_response_error(h: ast.ExceptHandler) -> bool:
    """An except clause that catches server error replies (redis-py's ResponseError,
    its base RedisError, or a pyctl.errors class)."""
    return h.type is not None and any(n in ast.unparse(h.type) for n in REPLY_ERRORS)


def _is_wording(n: ast.AST) -> bool:
    """A string literal that is a REPLAY code or a piece of an error's wording."""
    if not (isinstance(n, ast.Constant) and isinstance(n.value, str)) or not n.value.strip():
        return False
    return n.value.strip().split(" ", 1)[0] in CODE_WORDS or any(w in n.value for w in WORDING)


def _text_reads(scope: ast.AST, exc: str) -> list[int]:
    """Lines in scope that read the text of the exception named exc: str(exc), exc.args
    (or a name assigned from them) compared with a string or searched."""
    def text_of_exc(n: ast.AST) -> bool:
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "str":
            return any(isinstance(a, ast.Name) and a.id == exc for a in n.args)
        if isinstance(n, ast.Attribute) and n.attr == "args":
            return isinstance(n.value, ast.Name) and n.value.id == exc
        return isinstance(n, ast.Subscript) and text_of_exc(n.value)

    tainted: set[str] = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and text_of_exc(node.value):
            tainted |= {t.id for t in node.targets if isinstance(t, ast.Name)}

    def is_text(n: ast.AST) -> bool:
        return text_of_exc(n) or (isinstance(n, ast.Name) and n.id in tainted)

    bad = []
    for node in ast.walk(scope):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(is_text(x) for x in sides) and any(isinstance(x, ast.Constant) for x in sides):
                bad.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in TEXT_METHODS and is_text(node.func.value):
                bad.append(node.lineno)
            elif node.func.attr in ("search", "match", "fullmatch") and \
                    any(is_text(a) for a in node.args):
                bad.append(node.lineno)
    return bad


def wording_reads(tree: ast.AST) -> list[int]:
    """Lines that read a server error's text: in an except clause that catches error
    replies, or a function taking a ResponseError, the exception's text compared with or
    searched for a string; anywhere, a REPLAY code or error wording compared with text."""
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.name and _catches_response_error(node):
            for stmt in node.body:
                bad += _text_reads(stmt, node.name)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for a in node.args.args:
                if a.annotation is not None and "ResponseError" in ast.unparse(a.annotation):
                    bad += _text_reads(node, a.arg)
        elif isinstance(node, ast.Compare):
            if any(_is_wording(x) for x in [node.left, *node.comparators]):
                bad.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in TEXT_METHODS and any(_is_wording(a) for a in node.args):
            bad.append(node.lineno)
    return sorted(set(bad))


def test_no_module_parses_error_wording() -> None:
    found = {}
    for d in SCANNED:
        for p in sorted((ROOT / d).rglob("*.py")):
            lines = wording_reads(ast.parse(p.read_text(), str(p)))
            if lines:
                found[str(p.relative_to(ROOT))] = lines
    assert not found, f"error wording read at {found}: use pyctl.errors (codes)"


@pytest.mark.parametrize("src", [
    'try:\n    f()\nexcept redis.ResponseError as e:\n    if str(e).startswith("RATELIMITED"):\n'
    '        pass\n',
    'try:\n    f()\nexcept redis.ResponseError as e:\n    if "no such table" in str(e):\n'
    '        pass\n',
    'try:\n    f()\nexcept redis.ResponseError as err:\n    msg = str(err)\n'
    '    ok = msg.startswith("invalid priority")\n',
    'def g(e: redis.ResponseError) -> bool:\n    return "RATELIMITED" in str(e)\n',
    'reason = reason.replace("RATELIMITED ", "")\n',
])
def test_the_wording_check_can_fail(src: str) -> None:
    """The patterns this change removed are each found by the check."""
    assert wording_reads(ast.parse(src)), src


def test_the_wording_check_passes_legitimate_code() -> None:
    ok = ('try:\n    f()\nexcept redis.ResponseError as e:\n    print(f"failed: {e}")\n'
          '    if errors.code_of(e) == RateLimited.code:\n        pass\n'
          'if line.startswith("model name"):\n    pass\n'
          'try:\n    f()\nexcept OSError as e:\n    first = str(e).splitlines()[0]\n')
    assert wording_reads(ast.parse(ok)) == []
