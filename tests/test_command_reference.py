"""The command reference against the server's own command table: the generated index
(docs/reference/commands.md, from fstack_redis/commands.json at build time) lists every
command and subcommand the running server has and no other, and the hand-written
family table of docs/reference/redis.md and the replay table of
docs/reference/replay.md name every command the server has, and only those."""

from __future__ import annotations

import importlib.util
import re
from typing import Any

import redis
from doc_blocks import DOCS, ROOT, section


def _hook() -> Any:
    spec = importlib.util.spec_from_file_location("docs_reference",
                                                  ROOT / "docs" / "hooks" / "reference.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def documented() -> set[str]:
    """Commands named in the first column of the Redis and replay command tables (the
    parenthesised subcommand lists are not commands)."""
    names: set[str] = set()
    text = (DOCS / "reference" / "redis.md").read_text()
    for line in section(text, "# Redis commands").splitlines():
        if line.startswith("| ") and not line.startswith("| family"):
            cells = line.split("|")
            if len(cells) > 2:
                body = re.sub(r"\([^)]*\)", "", cells[2])
                names |= {m.lower() for m in re.findall(r"`([A-Z][A-Z0-9_-]*)`", body)}
    replay = (DOCS / "reference" / "replay.md").read_text()
    for line in replay.split("\n## ", 1)[0].splitlines():
        names |= {m.lower() for m in re.findall(r"`((?:REPLAY|PARAM)\.[A-Z]+)", line)}
    return names


def _server_commands(port: int) -> tuple[set[str], set[str]]:
    """(top-level names, 'name|sub' names) as COMMAND LIST and COMMAND INFO give them."""
    r = redis.Redis(port=port, protocol=2)
    have = {c if isinstance(c, str) else c.decode() for c in r.command_list()}
    top = {c for c in have if "|" not in c}
    conn = r.connection_pool.get_connection()  # the raw reply, without redis-py's parsing
    try:
        conn.send_command("COMMAND", "INFO", *sorted(top))
        infos = conn.read_response()
    finally:
        r.connection_pool.release(conn)
    subs = {sub[0].decode() for info in infos for sub in (info[9] if len(info) > 9 else [])}
    r.close()
    return top, subs


def test_pages_list_exactly_the_servers_commands(inreplay_server: Any) -> None:
    have, _ = _server_commands(inreplay_server.port)
    docs = documented()
    assert not have - docs, f"commands the pages do not list: {sorted(have - docs)}"
    assert not docs - have, f"the pages list commands the server lacks: {sorted(docs - have)}"


def test_generated_index_is_the_servers_table(inreplay_server: Any) -> None:
    hook = _hook()
    top, subs = _server_commands(inreplay_server.port)
    assert hook.command_names() == top
    rendered = hook.render("commands")
    listed = {m.lower().replace(" ", "|")
              for m in re.findall(r"^\| `([A-Z][A-Z0-9_.-]*(?: [A-Z0-9_-]+)?)` \|", rendered,
                                  re.M)}
    assert listed == top | subs
    page = (DOCS / "reference" / "commands.md").read_text()
    assert "<!-- generated: commands -->" in page and "| `GET` |" not in page
