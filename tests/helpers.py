"""Helpers shared by the test suites (one definition each; import from here).

pytest puts tests/ on sys.path (no __init__.py, the default import mode), so a
test file imports these as ``from helpers import free_port``.
"""

from __future__ import annotations

from pyctl import proc

HOST = "127.0.0.1"


free_port = proc.free_port
die_with_parent = proc.die_with_parent
mbulk = proc.resp_command


def bulk(b: bytes | None) -> bytes:
    """A RESP2 bulk string reply, or the null bulk for None."""
    return b"$-1\r\n" if b is None else b"$%d\r\n%s\r\n" % (len(b), b)


def crc64(data: bytes) -> int:
    """Redis's CRC-64 (Jones, reflected), bit by bit: DUMP's trailer."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x95AC9329AC4BC9B5 if crc & 1 else crc >> 1
    return crc


def dump_payload(body: bytes) -> bytes:
    """A DUMP payload around an RDB value (type byte and encoding): RDB version 10 and
    the CRC-64, as RESTORE checks them."""
    body += bytes([10, 0])
    return body + crc64(body).to_bytes(8, "little")
