"""`pyctl start`'s options are generated, one per setting, from one description each.

A setting the C server has is described by its row in fstack_redis/config.c's parameter
table: the flag's help is the row's doc and "(default X)" with the row's default, its
type, bounds and choices are the row's. Changing a row's doc or default in config.c (and
rebuilding libinreplay) changes `pyctl start --help` without touching any Python file:
test_help_follows_config_c reads the rows out of config.c itself and finds them in the
help, and checks that no Python file of pyctl repeats a doc. A pyctl-only setting is
described once, in its ServerConfig field's metadata. Every TOML key has a flag and every
flag a TOML key (but --config, which names the file).
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pyctl import cli, config
from pyctl.config import C_FIELDS, OWN_DEFAULTS, FlagSpec, ServerConfig

if TYPE_CHECKING:
    from conftest import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
FIELDS = [f.name for f in dataclasses.fields(ServerConfig)]
C_BACKED = [n for n in FIELDS if config.c_param(n) is not None]
OWN = [n for n in FIELDS if config.c_param(n) is None]
SPECS = {s.name: s for s in config.flag_specs()}


def _help_text() -> str:
    """`pyctl start --help` as an operator sees it, unwrapped (one space between words)."""
    env = dict(os.environ, COLUMNS="100")
    p = subprocess.run([sys.executable, "-m", "pyctl", "start", "--help"], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 0, p.stderr
    return " ".join(p.stdout.split())


@pytest.fixture(scope="module")
def help_text() -> str:
    return _help_text()


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_settings_are_split_as_documented() -> None:
    """The C-backed settings are the ones the tests below hold to the C table; a field the
    C table does not have carries its own description (and one that it has, none)."""
    assert {"alpha", "maxbytes", "maxclients", "stack", "verbose", "port", "listen_port",
            "client_output_buffer_limit", "dir"} <= set(C_BACKED)
    for name in C_BACKED:
        assert "help" not in config._field(name).metadata, f"{name}: its doc is the C row's"
    for name in OWN:
        assert config._field(name).metadata.get("help"), f"{name}: no description"
    for f in dataclasses.fields(ServerConfig):
        assert set(f.metadata) <= set(config.FLAG_META), f.name
    cfg = ServerConfig()
    for name in OWN_DEFAULTS:  # a C row, but pyctl's own default, which the help says
        p = config.c_param(name)
        assert p is not None and getattr(cfg, name) != p["default"], name
        shown = config._field(name).metadata["default_text"]
        assert SPECS[name].help.endswith(f"(default {shown})"), name


def test_every_toml_key_has_a_flag_and_every_flag_a_key() -> None:
    """TOML keys are the ServerConfig fields; the parser's options are exactly their flags,
    plus --help and --config (the TOML file itself, which is no setting)."""
    parser = cli.start_parser()
    dests = {a.dest for a in parser._actions}
    assert dests == set(config.FIELD_TYPES) | {"help", "config"}
    for a in parser._actions:
        if a.dest in config.FIELD_TYPES:
            assert a.option_strings == [config.flag(a.dest)]


def test_no_start_option_is_hand_written() -> None:
    """Each option's help, parser, choices and metavar are the generated ones, and cli.py
    has no add_argument for any setting's flag."""
    parser = cli.start_parser()
    for a in parser._actions:
        if a.dest not in SPECS:
            continue
        spec: FlagSpec = SPECS[a.dest]
        assert a.help == spec.help.replace("%", "%%"), a.dest
        assert a.default is None, a.dest  # so that only given flags override the TOML file
        if spec.action == "store_true":
            assert a.nargs == 0 and a.const is True, a.dest
        else:
            assert (tuple(a.choices) if a.choices else None) == spec.choices, a.dest
            assert a.metavar == spec.metavar, a.dest
            assert (a.type is None) == (spec.parse is None), a.dest
    tree = ast.parse((ROOT / "pyctl" / "cli.py").read_text())
    add_start = next(n for n in ast.walk(tree)
                     if isinstance(n, ast.FunctionDef) and n.name == "_add_start")
    literal = [arg.value for node in ast.walk(add_start)
               if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr == "add_argument"
               for arg in node.args if isinstance(arg, ast.Constant)]
    assert literal == ["--config"]


@pytest.mark.parametrize("name", C_BACKED)
def test_c_backed_help_is_the_c_doc_and_default(name: str, help_text: str) -> None:
    p = config.c_param(name)
    assert p is not None
    spec = SPECS[name]
    assert spec.help.startswith(p["doc"]), spec.help
    default = config.render(name, config.field_default(name))
    if name not in OWN_DEFAULTS:
        assert spec.help.endswith(f" (default {default})"), spec.help
    assert _words(f"{config.flag(name)}") in help_text
    assert _words(spec.help) in help_text, f"{name}: {spec.help!r} not in --help"
    if p["type"] == "enum":
        assert spec.choices == tuple(p["values"].split(","))
    if p["type"] == "bool":  # one on by default takes yes|no (--protected-mode no)
        assert spec.action == ("store" if config.field_default(name) else "store_true")


def _same(name: str, shown: str, reported: str) -> bool:
    """Does a default as --help shows it equal what CONFIG GET reports?"""
    p = config.c_param(name)
    assert p is not None
    if name == "client_output_buffer_limit":  # "normal HARD 0 0 slave ... pubsub ..."
        reported = reported.split()[1]
    if name in config.size_fields():
        return config.parse_size(shown) == int(reported)
    if p["type"] == "double":
        return float(shown) == float(reported)
    if p["type"] == "string" and shown == "none":
        return reported == ""
    return shown == reported


@pytest.fixture
def default_server(server_factory: Any, monkeypatch: pytest.MonkeyPatch
                   ) -> Iterator[ServerProcess]:
    """An inreplay server started by `pyctl start` with nothing but --listen."""
    monkeypatch.delenv("INREPLAY_PYCTL_ARGS", raising=False)
    monkeypatch.delenv("INREPLAY_SERVER_CMD", raising=False)
    yield server_factory("inreplay", opened=False)


def test_help_defaults_are_what_the_server_reports(default_server: ServerProcess) -> None:
    """For every C-backed setting, the default in --help is the value CONFIG GET gives on a
    server started without the flag (but --listen, whose port and so `port` it sets, and
    dir, pyctl's own; requirepass is sensitive: CONFIG GET shows "" whatever it is)."""
    c = default_server.client()
    try:
        for name in C_BACKED:
            if name in ("listen_port", *OWN_DEFAULTS):
                continue
            p = config.c_param(name)
            assert p is not None
            reported = c.config_get(p["name"])[p["name"]]
            shown = SPECS[name].help.rsplit(" (default ", 1)[1].removesuffix(")")
            assert _same(name, shown, reported), (name, shown, reported)
    finally:
        c.close()


def _rows() -> dict[str, tuple[str, str]]:
    """config.c's parameter rows that initialise an ir_config member: member -> (default
    text, doc), read from the source."""
    src = (ROOT / "fstack_redis" / "config.c").read_text()
    defines = dict(re.findall(r"#define (IR_\w+) ([0-9.e-]+)\n",
                              (ROOT / "fstack_redis" / "replay" / "replay.h").read_text()
                              + (ROOT / "fstack_redis" / "replay" / "options.h").read_text()
                              + (ROOT / "fstack_redis" / "inreplay.h").read_text()))
    table = src[src.index("static const cfgparam params[] = {"):]
    table = table[:table.index("\n};")] + "\n"
    out = {}
    for m in re.finditer(r'\n    \{(.*?)\},(?=\n)', table, re.S):
        items, depth, cur, in_str = [], 0, "", False
        for i, ch in enumerate(m.group(1)):
            if ch == '"' and m.group(1)[i - 1] != "\\":
                in_str = not in_str
            elif not in_str and ch == "(":
                depth += 1
            elif not in_str and ch == ")":
                depth -= 1
            elif not in_str and depth == 0 and ch == ",":
                items.append(cur.strip())
                cur = ""
                continue
            cur += ch
        items.append(cur.strip())
        f = re.fullmatch(r"F\((\w+), \w+\)", items[8])
        if f is None:
            continue

        def literal(item: str) -> str:
            # a number defined once in replay.h, options.h or inreplay.h, as a string
            item = re.sub(r"IR_TABLE_XSTR\(\s*(\w+)\s*\)", lambda d: f'"{defines[d.group(1)]}"',
                          item)
            return "".join(ast.literal_eval(f'"{s}"') for s in re.findall(r'"((?:[^"\\]|\\.)*)"',
                                                                          item))
        out[f.group(1)] = (literal(items[6]), literal(items[10]))
    return out


def test_help_follows_config_c(help_text: str) -> None:
    """The doc and default of every C-backed setting's row, as written in config.c, are in
    `pyctl start --help`; no Python file of pyctl repeats a doc (so editing the row is the
    one way to change the help)."""
    rows = _rows()
    python = "\n".join(_words(p.read_text()) for p in (ROOT / "pyctl").glob("*.py"))
    assert len(rows) >= 25
    for name in C_BACKED:
        default, doc = rows[C_FIELDS.get(name, name)]
        assert _words(doc) in help_text, (name, doc)
        assert doc not in python, f"{name}: pyctl repeats the C doc {doc!r}"
        if name in OWN_DEFAULTS:
            continue
        shown = SPECS[name].help.rsplit(" (default ", 1)[1].removesuffix(")")
        if name == "client_output_buffer_limit":
            default = default.split()[1]  # the normal class's hard limit
        if name in config.size_fields():
            assert config.parse_size(shown) == config.parse_size(default), name
        elif SPECS[name].action == "store_true" or config.c_param(name)["type"] != "double":
            assert shown == (default or "none"), name
        else:
            assert float(shown) == float(default), name


def _bounded() -> Iterator[tuple[str, Any, Any]]:
    for name, spec in SPECS.items():
        bounds = config.c_bounds(name) or config._field(name).metadata.get("bounds")
        if bounds is not None and spec.parse is not None:
            yield name, bounds[0], bounds[1]


@pytest.mark.parametrize(("name", "lo", "hi"), list(_bounded()))
def test_bounds_are_enforced_by_the_flag(name: str, lo: Any, hi: Any,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """One value past min and past max gets a one-line error naming the flag and the
    bound; min and max themselves are taken."""
    parser = cli.start_parser()
    kind = config.c_param(name)["type"] if config.c_param(name) else "int"
    octal = bool(config.c_param(name) and config.c_param(name).get("octal"))
    show = config.format_size if name in config.size_fields() else (
        (lambda v: f"{v:g}") if kind == "double" else
        (lambda v: f"{v:o}") if octal else str)
    text = show if octal else str  # an octal flag (unixsocketperm) is written in base 8
    step = 0.5 if kind == "double" else 1
    fine = [lo] + ([] if hi in (None, float("inf")) else [hi])
    for v in fine:
        assert getattr(parser.parse_args([config.flag(name), text(v)]), name) == v
    bad = [lo - step] + ([] if hi in (None, float("inf")) else [hi + step])
    for v in bad:
        with pytest.raises(SystemExit) as e:
            parser.parse_args([config.flag(name), text(v)])
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        assert err[0].startswith(f"pyctl start: {config.flag(name)}: must be "), err
        assert f" {show(lo)}" in err[0] and (hi in (None, float("inf")) or f" {show(hi)}"
                                              in err[0]), err


def test_sizes_take_redis_units_and_enums_their_values(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    parser = cli.start_parser()
    args = parser.parse_args(["--maxbytes", "64mb", "--client-query-buffer-limit", "2GB",
                              "--stack", "dpdk", "--verbose"])
    assert (args.maxbytes, args.client_query_buffer_limit) == (64 << 20, 2 << 30)
    assert args.stack == "dpdk" and args.verbose is True and args.daemon is None
    for bad in (["--stack", "tcp"], ["--maxbytes", "1.5gb"], ["--alpha", "inf"]):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"pyctl start: {bad[0]}: "), err


def test_a_percent_in_a_doc_reaches_the_help(help_text: str) -> None:
    """argparse formats help with %: a doc's "100%" is escaped, not an error."""
    assert "100% of the network core" in help_text


def test_groups_and_dpdk_only_come_from_the_fields(help_text: str) -> None:
    assert set(config.DPDK_ONLY) == {"cores", "port", "vdev", "ip", "listen_port", "queues",
                                     "mbufs", "hugepages", "file_prefix", "mtu"}
    parser = cli.start_parser()
    titles = {g.title: {a.dest for a in g._group_actions} for g in parser._action_groups}
    assert titles["DPDK stack (--stack dpdk)"] == {*config.DPDK_ONLY, "netns"}
    assert titles["replay groups (see 'Replay groups and sharding' in the docs)"] == {
        "shards", "shard_group", "shard_index"}
    for title in config.FLAG_GROUPS.values():
        assert f" {title}: " in help_text


def test_the_pyctl_page_lists_every_start_flag() -> None:
    """The pyctl reference page's table names every `pyctl start` option, and no
    other (the page's full --help listing below it is generated)."""
    ref = (ROOT / "docs" / "reference" / "pyctl.md").read_text().split("\n## ", 1)[0]
    listed = set()
    for line in ref.splitlines():
        if line.startswith("| `pyctl start"):
            listed |= set(re.findall(r"(--[a-z][a-z-]*)", line))
    options = {o for a in cli.start_parser()._actions for o in a.option_strings} - {"-h",
                                                                                   "--help"}
    assert listed - options == set(), "the page lists flags pyctl start does not have"
    assert options - listed == set(), "the pyctl page's table lacks these flags"


def test_the_mtu_range_is_the_c_headers_everywhere() -> None:
    """IR_MTU_MIN/IR_MTU_MAX (inreplay.h) bound --mtu of pyctl start, the C table's row,
    its doc and the test veth of `pyctl netns`: one definition."""
    from pyctl import netns

    lo, hi = config.mtu_range()
    assert (lo, hi) == (576, 9600)
    assert config.c_bounds("mtu") == (0, hi)
    assert f"{lo}-{hi}" in config.c_param("mtu")["doc"]
    for ok in (lo, 1500, hi):
        assert netns.check_mtu(ok) == ok
        config.ServerConfig(stack="dpdk", mtu=ok, ip="10.77.0.2/24").validate()
    for bad in (lo - 1, hi + 1):
        with pytest.raises(netns.SetupError, match=f"choose {lo}-{hi}"):
            netns.check_mtu(bad)
        with pytest.raises(config.ConfigError, match=f"choose {lo}-{hi}"):
            config.ServerConfig(stack="dpdk", mtu=bad, ip="10.77.0.2/24").validate()
