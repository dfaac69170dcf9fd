"""The layering rules of the architecture, checked on the source tree.

- The server (fstack_redis/, its engine in replay/ too) sees the network only
  through transport.h: it never includes socket, DPDK or lwIP headers. (A
  CONFIG SET port check that bound a socket from config.c once broke this; the
  check now asks the transport.)
- Dependencies point one way, RL code -> client -> appliance: the control plane
  (pyctl/) imports no RL code (actors/, learner/, as inreplay.actors and
  inreplay.learner), nor the inreplay package, which re-exports the client.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

NETWORK_HEADERS = re.compile(
    r'^\s*#\s*include\s*[<"]('
    r"sys/socket\.h|netinet/[^>\"]*|arpa/[^>\"]*|netdb\.h|net/[^>\"]*|linux/if_[^>\"]*"
    r"|rte_[^>\"]*|lwip/[^>\"]*|netif/[^>\"]*|lwipopts\.h"
    r')[>"]',
    re.M,
)


def test_server_includes_no_socket_dpdk_or_lwip_header() -> None:
    offenders = []
    for path in sorted((ROOT / "fstack_redis").rglob("*.[ch]")):
        for m in NETWORK_HEADERS.finditer(path.read_text()):
            offenders.append(f"{path.relative_to(ROOT)}: #include {m.group(1)}")
    assert not offenders, "the server must see the network only through transport.h:\n" + \
        "\n".join(offenders)


def test_the_pattern_catches_what_it_must() -> None:
    for line in ("#include <sys/socket.h>", '#include "lwip/tcp.h"', "#include <rte_mbuf.h>",
                 "#  include <arpa/inet.h>", "#include <netinet/in.h>"):
        assert NETWORK_HEADERS.search(line), line
    for line in ("#include <stdio.h>", '#include "transport.h"', "#include <sys/uio.h>"):
        assert not NETWORK_HEADERS.search(line), line


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_control_plane_imports_no_rl_code() -> None:
    offenders = []
    for path in sorted((ROOT / "pyctl").rglob("*.py")):
        bad = _imports(path) & {"actors", "learner", "inreplay"}
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "pyctl must not import RL code:\n" + "\n".join(offenders)
