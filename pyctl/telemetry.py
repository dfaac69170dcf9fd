"""DPDK telemetry, as dpdk-telemetry.py reads it: a SOCK_SEQPACKET unix socket
per EAL --file-prefix that answers JSON to commands such as /inreplay/stats."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any


class TelemetryError(RuntimeError):
    """The telemetry socket is missing or answered something unexpected."""


def socket_path(file_prefix: str, runtime_dir: str = "/var/run/dpdk") -> Path:
    return Path(runtime_dir) / file_prefix / "dpdk_telemetry.v2"


def query(file_prefix: str, *commands: str) -> dict[str, Any]:
    """Send each command on one connection; return {command: reply}."""
    path = socket_path(file_prefix)
    out: dict[str, Any] = {}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
            s.settimeout(2)
            s.connect(str(path))
            hello = json.loads(s.recv(1024))
            size = int(hello.get("max_output_len", 16384))
            for cmd in commands:
                s.send(cmd.encode())
                reply = json.loads(s.recv(size))
                out[cmd] = reply.get(cmd)
    except (OSError, ValueError) as e:
        raise TelemetryError(f"DPDK telemetry at {path}: {e}") from None
    return out
