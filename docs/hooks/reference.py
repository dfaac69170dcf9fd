"""The documentation's generated parts, filled in at build time from the real sources.

A page says ``<!-- generated: NAME -->`` on a line of its own and the mkdocs hook
(``on_page_markdown``) replaces it with ``render(NAME)``:

- ``commands``: every command and subcommand from ``fstack_redis/commands.json``
  (the file the server's command table is generated from), by group;
- ``config``: every setting of the C parameter table (``fstack_redis/config.c``, read
  through ``pyctl.config.c_params``): type, default, bounds, whether CONFIG SET takes it;
- ``pyctl-help``: ``pyctl --help`` and each subcommand's ``--help``, from pyctl's own
  argparse parsers; ``demo-help``: the same for ``pyctl demo``.

Nothing here repeats a command, a setting or a flag: a change to the sources is a
change to the site. tests/test_docs.py checks the output against a running server.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def commands() -> dict[str, dict[str, Any]]:
    """fstack_redis/commands.json as the server's build reads it."""
    return json.loads((ROOT / "fstack_redis" / "commands.json").read_text())


def command_names() -> set[str]:
    """The top-level command names the generated reference lists (lower case)."""
    return set(commands())


def _arity(n: int) -> str:
    return f"{n}" if n >= 0 else f"≥ {-n}"


def render_commands() -> str:
    by_group: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for name, spec in commands().items():
        by_group.setdefault(spec.get("group", "other"), []).append((name, spec))
    out: list[str] = []
    for group in sorted(by_group):
        title = "replay (REPLAY.*)" if group == "module" else group
        out += [f"### {title}", "", "| command | summary | arity | flags | since |",
                "|---|---|---|---|---|"]
        for name, spec in sorted(by_group[group]):
            out.append(f"| `{name.upper()}` | {_cell(spec.get('summary', ''))} | "
                       f"{_arity(spec['arity'])} | {_cell(spec.get('flags', ''))} | "
                       f"{spec.get('since', '')} |")
            for sub, sspec in sorted(spec.get("subcommands", {}).items()):
                out.append(f"| `{name.upper()} {sub.upper()}` | "
                           f"{_cell(sspec.get('summary', ''))} | {_arity(sspec['arity'])} | "
                           f"{_cell(sspec.get('flags', ''))} | {sspec.get('since', '')} |")
        out.append("")
    return "\n".join(out)


def _bounds(p: dict[str, Any]) -> str:
    if p.get("values"):
        return " ".join(f"`{v}`" for v in p["values"])
    if p.get("min") is None:
        return ""
    hi = "∞" if p["max"] is None or p["max"] >= 2**62 else f"{p['max']:g}"
    return f"{p['min']:g} – {hi}"


def render_config() -> str:
    sys.path.insert(0, str(ROOT))
    from pyctl import config

    out = ["| setting | type | default | range or values | CONFIG SET | meaning |",
           "|---|---|---|---|---|---|"]
    for p in sorted(config.c_params(), key=lambda p: p["name"]):
        name = f"`{p['name']}`" + (f" (alias `{p['alias']}`)" if p.get("alias") else "")
        default = f"`{p['default']}`" if p.get("default") not in (None, "") else '`""`'
        mutable = ("no (a start flag; CONFIG does not show it)" if p.get("hidden")
                   else "yes" if p.get("mutable") and not p.get("fixed") else "no")
        doc = _cell(p.get("doc") or "") + (" (accepted, no effect)" if p.get("noop") else "")
        out.append(f"| {name} | {p['type']} | {default} | {_bounds(p)} | {mutable} | {doc} |")
    return "\n".join(out)


def _help(argv: list[str]) -> str:
    sys.path.insert(0, str(ROOT))
    from pyctl import cli

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
        cli.main(argv)
    return buf.getvalue().rstrip()


SUBCOMMANDS = ("start", "status", "stop", "stats", "drivers", "netns", "module-path")


def render_pyctl_help() -> str:
    out = ["### pyctl", "", "```text", _help(["--help"]), "```", ""]
    for sub in SUBCOMMANDS:
        out += [f"### pyctl {sub}", "", "```text", _help([sub, "--help"]), "```", ""]
    return "\n".join(out)


def render_demo_help() -> str:
    sys.path.insert(0, str(ROOT))
    from inreplay.actors import demo

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
        demo.main(["--help"])
    return "\n".join(["```text", buf.getvalue().rstrip(), "```"])


RENDERERS = {"commands": render_commands, "config": render_config,
             "pyctl-help": render_pyctl_help, "demo-help": render_demo_help}


def render(name: str) -> str:
    if name not in RENDERERS:
        raise KeyError(f"no generated block named {name!r} (have: {sorted(RENDERERS)})")
    return RENDERERS[name]()


def fill(markdown: str) -> str:
    """A page's markdown with every generated marker replaced."""
    return MARKER.sub(lambda m: render(m.group(1)), markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return fill(markdown)
