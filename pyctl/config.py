"""Server configuration: one dataclass, filled from defaults, a TOML file and flags."""

from __future__ import annotations

import dataclasses
import ipaddress
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the setting."""


@dataclass
class ServerConfig:
    """Everything `pyctl start` can set. TOML keys are the field names."""

    stack: str = "kernel"
    """Network stack: "kernel" (epoll on kernel sockets) or "dpdk" (userspace TCP/IP)."""
    listen: str = "127.0.0.1:6379"
    """HOST:PORT to accept clients on; port 0 lets the kernel choose."""
    capacity: int = 0
    """If > 0, create the table `table` with this many slots at start-up."""
    table: str = "replay"
    """Name of the table created at start-up when `capacity` > 0."""
    alpha: float = 0.6
    """Priority exponent of the start-up table: stored priority = (p + epsilon) ** alpha."""
    beta: float = 0.4
    """Default importance-sampling exponent of the start-up table."""
    epsilon: float = 1e-6
    """Added to every raw priority of the start-up table before the exponent."""
    maxbytes: int = 1 << 30
    """Arena size in bytes for the start-up table and for REPLAY.CREATE without MAXBYTES."""
    fanout: int = 0
    """Sum-tree fanout K (2, 4, 8, 16 or 32); 0 means the measured default."""
    seed: int = 0
    """Seed for the samplers' random numbers; 0 seeds from the clock."""
    maxclients: int = 10000
    """Connections beyond this get "-ERR max number of clients reached"."""
    proto_max_bulk_len: int = 512 * 1024 * 1024
    """Largest bulk string a client may send, in bytes (Redis's proto-max-bulk-len)."""
    client_query_buffer_limit: int = 1024 * 1024 * 1024
    """Largest amount of unparsed input per client, in bytes."""
    tcp_backlog: int = 511
    """listen() backlog."""
    daemon: bool = False
    """Detach and run in the background; `pyctl stop` ends it."""
    logfile: str = ""
    """Where a daemon writes its log; empty means <rundir>/<port>.log."""
    verbose: bool = False
    """Log every connection and protocol error."""
    requirepass: str = ""
    """Password for AUTH; empty means protected mode: only loopback and client_subnet may talk."""
    client_subnet: str = ""
    """A.B.C.D/NN of clients accepted without a password (protected mode), e.g. the actors'."""
    maxmemory: int = 0
    """Bytes; beyond it writes get -OOM and reads keep working. 0 means no limit."""
    client_output_buffer_limit: int = 0
    """Bytes of replies pending for one client before it is disconnected; 0 means no limit."""
    timeout: int = 0
    """Close clients idle this many seconds (Redis's timeout); 0 means never."""
    request_timeout_ms: int = 30000
    """A request that has started arriving must complete within this (trickling clients)."""
    tcp_keepalive: int = 300
    """TCP keepalive interval in seconds, so half-open connections are reclaimed; 0 = off."""
    dir: str = "."
    """Directory SAVE and BGSAVE write snapshots to."""
    restore: str = ""
    """Directory to load the newest complete snapshot from at start (empty: start empty)."""
    save_on_shutdown: bool = False
    """SAVE a snapshot to `dir` before exiting on SIGTERM, SIGINT or SHUTDOWN."""
    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    """Reserved for settings of later stacks; not set from TOML directly."""

    # ---- derived -------------------------------------------------------------
    @property
    def host(self) -> str:
        return split_listen(self.listen)[0]

    @property
    def port(self) -> int:
        return split_listen(self.listen)[1]

    def validate(self) -> None:
        """Raise ConfigError naming the first bad setting."""
        split_listen(self.listen)
        if self.stack not in ("kernel", "dpdk"):
            raise ConfigError(f"stack: must be 'kernel' or 'dpdk', not {self.stack!r}")
        positive = ("maxclients", "proto_max_bulk_len", "client_query_buffer_limit",
                    "tcp_backlog", "maxbytes")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"{flag(name)}: must be a positive integer")
        if self.capacity < 0:
            raise ConfigError("--capacity: must be >= 0")
        if self.fanout not in (0, 2, 4, 8, 16, 32):
            raise ConfigError("--fanout: must be one of 2, 4, 8, 16, 32 (or 0 for the default)")
        for name in ("alpha", "beta", "epsilon"):
            v = getattr(self, name)
            if not (v >= 0 and v != float("inf")):
                raise ConfigError(f"{flag(name)}: must be a finite number >= 0")
        if not self.table or len(self.table.encode()) > 200:
            raise ConfigError("--table: must be 1 to 200 bytes")
        if self.seed < 0:
            raise ConfigError("--seed: must be >= 0")
        for name in ("maxmemory", "client_output_buffer_limit", "timeout", "request_timeout_ms",
                     "tcp_keepalive"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{flag(name)}: must be >= 0")
        if self.client_subnet:
            try:
                ipaddress.ip_network(self.client_subnet, strict=False)
            except ValueError:
                raise ConfigError(f"--client-subnet: {self.client_subnet!r} is not "
                                  "an address/prefix like 10.0.0.0/24") from None
        if self.restore and not Path(self.restore).is_dir():
            raise ConfigError(f"--restore: {self.restore}: no such directory")


def flag(name: str) -> str:
    """The command-line flag for a field name."""
    return "--" + name.replace("_", "-")


def split_listen(listen: str) -> tuple[str, int]:
    """Split HOST:PORT (IPv6 as [::1]:PORT); raise ConfigError naming --listen."""
    host, sep, port_s = listen.rpartition(":")
    if not sep or not host or not port_s.isdigit():
        raise ConfigError(f"--listen: expected HOST:PORT, got {listen!r}")
    host = host.strip("[]")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if host != "localhost":
            raise ConfigError(f"--listen: {host!r} is not an IP address") from None
    port = int(port_s)
    if not 0 <= port <= 65535:
        raise ConfigError(f"--listen: port must be 0-65535, got {port}")
    return host, port


FIELD_TYPES = {f.name: f.type for f in fields(ServerConfig) if f.name != "extra"}


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML config file; unknown keys and wrong types are errors naming the key."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"--config: {p}: no such file") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"--config: {p}: {e}") from None
    out: dict[str, Any] = {}
    defaults = ServerConfig()
    for key, value in data.items():
        name = key.replace("-", "_")
        if name not in FIELD_TYPES:
            raise ConfigError(f"--config: {p}: unknown setting {key!r}")
        want = type(getattr(defaults, name))
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise ConfigError(f"--config: {p}: {key} must be {want.__name__}")
        out[name] = value
    return out


def build(toml_path: str | None, overrides: dict[str, Any]) -> ServerConfig:
    """Defaults, then the TOML file, then flags that were given."""
    values: dict[str, Any] = {}
    if toml_path:
        values.update(load_toml(toml_path))
    values.update({k: v for k, v in overrides.items() if v is not None})
    cfg = dataclasses.replace(ServerConfig(), **values)
    cfg.validate()
    return cfg
