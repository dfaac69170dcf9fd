#!/usr/bin/env python3
"""The command table's generator: commands.json -> commands_table.inc.

commands.json is the one description of every command the server has, as
Redis 7.0 describes its own in src/commands/*.json: per command its docs
(summary, since, group, complexity), handler, arity, legacy key positions,
flag words, ACL categories beyond those its flags imply, key specs and
subcommands (each with its own docs, arity, flags, categories and key specs).
commands.c includes the generated arrays (commands[], subcommands[],
keyspecs[], keyword_search[] and the docs beside the first two); nothing
else lists commands. The build runs this (fstack_redis/meson.build), and it
refuses a description it does not understand, one line per problem:

    python3 fstack_redis/gen_commands.py fstack_redis/commands.json OUT.inc
"""
from __future__ import annotations

import json
import re
import sys
from typing import Any

# Redis's command flag words (COMMAND INFO), the key spec flags and the groups
# of COMMAND DOCS; inreplay's own commands are in group "module", as a module's.
FLAGS = {"admin", "allow_busy", "asking", "blocking", "denyoom", "fast", "loading",
         "may_replicate", "module", "movablekeys", "no_async_loading", "no_auth",
         "no_mandatory_keys", "no_multi", "noscript", "protected", "pubsub", "readonly",
         "sentinel", "skip_monitor", "skip_slowlog", "stale", "write"}
SPEC_FLAGS = {"RO", "RW", "OW", "RM", "access", "update", "insert", "delete", "not_key",
              "incomplete", "variable_flags"}
ACL = {"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
       "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",
       "dangerous", "connection", "transaction", "scripting", "replay"}
GROUPS = {"generic", "string", "list", "set", "sorted-set", "hash", "pubsub", "transactions",
          "connection", "server", "scripting", "hyperloglog", "cluster", "sentinel", "geo",
          "stream", "bitmap", "module"}
COMMAND_KEYS = {"summary", "since", "group", "complexity", "handler", "arity", "keys",
                "flags", "acl", "key_specs", "subcommands", "bodies_by_reference"}
"""bodies_by_reference (inreplay's own, not a Redis flag word: COMMAND INFO does not show
it): the command only copies from its big arguments, so the parser may point them into
the transport's input instead of copying them first (resp.c)."""
SUB_KEYS = {"summary", "since", "complexity", "arity", "flags", "acl", "key_specs"}
NAME = re.compile(r"^[a-z][a-z0-9_.\-]*$")
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
VERSION = re.compile(r"^\d+\.\d+\.\d+$")


class Problems:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, where: str, what: str) -> None:
        self.lines.append(f"commands.json: {where}: {what}")


def c_str(s: str) -> str:
    return json.dumps(s)  # a JSON string of printable ASCII is a C string literal


def check_words(bad: Problems, where: str, field: str, words: str, known: set[str]) -> None:
    for w in words.split():
        if w not in known:
            bad(where, f"unknown {field} word '{w}' (known: {', '.join(sorted(known))})")


def check_entry(bad: Problems, where: str, e: dict[str, Any], allowed: set[str],
                sub: bool) -> None:
    for k in e:
        if k not in allowed:
            bad(where, f"unknown field '{k}' (fields: {', '.join(sorted(allowed))})")
    for k in ("summary", "since", "arity", "flags", "acl") + (() if sub else ("group", "handler",
                                                                           "keys")):
        if k not in e:
            bad(where, f"'{k}' is required")
    if "summary" in e and (not isinstance(e["summary"], str) or not e["summary"]):
        bad(where, "'summary' must be a non-empty string")
    if "since" in e and not VERSION.match(str(e["since"])):
        bad(where, f"'since' must be a version like 7.0.0, not {e['since']!r}")
    if not sub and e.get("group", "generic") not in GROUPS:
        bad(where, f"unknown group '{e.get('group')}' (groups: {', '.join(sorted(GROUPS))})")
    if not sub and not IDENT.match(str(e.get("handler", "x"))):
        bad(where, f"'handler' must be a C function name, not {e.get('handler')!r}")
    arity = e.get("arity", 1)
    if not isinstance(arity, int) or isinstance(arity, bool) or arity == 0:
        bad(where, "'arity' must be a non-zero integer (n: exactly n, -n: at least n)")
    keys = e.get("keys", [0, 0, 0])
    if not (isinstance(keys, list) and len(keys) == 3 and all(isinstance(x, int) for x in keys)):
        bad(where, "'keys' must be [first, last, step]")
    check_words(bad, where, "flag", str(e.get("flags", "")), FLAGS)
    check_words(bad, where, "ACL category", str(e.get("acl", "")), ACL)
    for i, ks in enumerate(e.get("key_specs", [])):
        w = f"{where} key_specs[{i}]"
        kinds = [k for k in ("range", "keynum", "unknown") if k in ks]
        for k in ks:
            if k not in {"flags", "begin", "range", "keynum", "unknown", "keyword"}:
                bad(w, f"unknown field '{k}'")
        if len(kinds) != 1:
            bad(w, "give exactly one of range [lastkey, step, limit], "
                   "keynum [keynumidx, firstkey, step] or unknown: true")
        elif kinds[0] != "unknown":
            v = ks[kinds[0]]
            if not (isinstance(v, list) and len(v) == 3 and all(isinstance(x, int) for x in v)):
                bad(w, f"'{kinds[0]}' must be three integers")
        if "keyword" in ks and "range" not in ks:
            bad(w, "a keyword spec finds its keys by a range")
        if not isinstance(ks.get("begin"), int):
            bad(w, "'begin' (the first key's index, or where the keyword search starts) "
                   "is required")
        check_words(bad, w, "key spec flag", str(ks.get("flags", "")), SPEC_FLAGS)


def spec_rows(name: str, specs: list[dict[str, Any]], keyspecs: list[str],
              keywords: list[str]) -> None:
    for ks in specs:
        if "unknown" in ks:
            kind, v = "KS_UNKNOWN", [0, 0, 0]
        elif "keynum" in ks:
            kind, v = "KS_KEYNUM", ks["keynum"]
        elif "keyword" in ks:
            kind, v = "KS_KEYWORD_RANGE", ks["range"]
            keywords.append(f"    {{{c_str(name)}, {c_str(ks['keyword'])}}},")
        else:
            kind, v = "KS_RANGE", ks["range"]
        keyspecs.append(f"    {{{c_str(name)}, {c_str(ks['flags'])}, {ks['begin']}, {kind}, "
                        f"{v[0]}, {v[1]}, {v[2]}}},")


def doc_row(e: dict[str, Any], group: str) -> str:
    return (f"    {{{c_str(e['summary'])}, {c_str(e['since'])}, {c_str(group)}, "
            f"{c_str(e.get('complexity', ''))}}},")


def generate(table: dict[str, Any]) -> tuple[str, list[str]]:
    bad = Problems()
    cmds, subs, specs, kws, cdocs, sdocs = [], [], [], [], [], []
    seen_handlers: dict[str, str] = {}
    for name, e in table.items():
        if not NAME.match(name):
            bad(name, "a command's name is lower case (letters, digits, '_', '.', '-')")
        if not isinstance(e, dict):
            bad(name, "must be an object")
            continue
        before = len(bad.lines)
        check_entry(bad, name, e, COMMAND_KEYS, sub=False)
        if len(bad.lines) > before:
            continue
        h = e["handler"]
        if h in seen_handlers and "subcommands" in e:
            bad(name, f"a container's handler must be its own ({h} also serves "
                      f"{seen_handlers[h]}): subcommands are found by it")
        seen_handlers.setdefault(h, name)
        k = e["keys"]
        by_ref = e.get("bodies_by_reference", False)
        if not isinstance(by_ref, bool):
            bad(name, "'bodies_by_reference' must be true or false")
        cmds.append(f"    {{{c_str(name)}, {h}, {e['arity']}, {k[0]}, {k[1]}, {k[2]}, "
                    f"{c_str(e['flags'])}, {c_str(e['acl'])}, 0, 0, 0, 0, {int(by_ref)}}},")
        cdocs.append(doc_row(e, e["group"]))
        spec_rows(name, e.get("key_specs", []), specs, kws)
        for sname, s in e.get("subcommands", {}).items():
            where = f"{name}|{sname}"
            if not NAME.match(sname):
                bad(where, "a subcommand's name is lower case")
            before = len(bad.lines)
            check_entry(bad, where, s, SUB_KEYS, sub=True)
            if len(bad.lines) > before:
                continue
            subs.append(f"    {{{h}, {c_str(name)}, {c_str(sname)}, {s['arity']}, "
                        f"{c_str(s['flags'])}, {c_str(s['acl'])}}},")
            sdocs.append(doc_row(s, e["group"]))
            spec_rows(where, s.get("key_specs", []), specs, kws)
    if bad.lines:
        return "", bad.lines
    out = ["/* Generated by fstack_redis/gen_commands.py from fstack_redis/commands.json:",
           " * edit commands.json, not this file. */",
           "static ir_command commands[] = {", *cmds, "};",
           "static const cmddoc command_docs[] = {", *cdocs, "};",
           "static const subcmd subcommands[] = {", *subs, "};",
           "static const cmddoc subcommand_docs[] = {", *sdocs, "};",
           "static const keyspec keyspecs[] = {", *specs, "};",
           "static const keyword_spec keyword_search[] = {", *(kws or ["    {NULL, NULL},"]), "};",
           ""]
    return "\n".join(out), []


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: gen_commands.py commands.json OUT.inc", file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            table = json.load(f)
    except (OSError, ValueError) as e:
        print(f"commands.json: {e}", file=sys.stderr)
        return 1
    text, problems = generate(table)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    with open(argv[2], "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
