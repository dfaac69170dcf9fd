"""Server configuration: one dataclass, filled from defaults, a TOML file and flags.

The defaults and bounds of every setting the C server also has come from the C
parameter table (fstack_redis/config.c) through cffi: ``ir_config_init`` for the
defaults, ``ir_config_params_json`` for types, bounds and docs. Nothing here
repeats them.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import re
import socket
import tomllib
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from pyctl import _native


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the setting."""


C_FIELDS = {"maxbytes": "default_maxbytes", "alpha": "table_alpha", "beta": "table_beta",
            "epsilon": "table_epsilon", "min_size": "table_min_size",
            "samples_per_insert": "table_samples_per_insert",
            "error_buffer": "table_error_buffer", "port": "dpdk_port", "mbufs": "dpdk_mbufs",
            "listen_port": "port"}
"""ServerConfig fields whose ir_config member has another name (the rest: the same)."""
OWN_DEFAULTS = ("dir",)
"""ServerConfig fields with a C row whose default is pyctl's own: dir ("" = a data
directory of the server's own under the run directory, where C's is ".")."""


@lru_cache(maxsize=1)
def c_params() -> tuple[dict[str, Any], ...]:
    """The C parameter table (see ir_config_params_json in inreplay.h)."""
    ffi, lib = _native.load()
    return tuple(json.loads(ffi.string(lib.ir_config_params_json()).decode()))


@lru_cache(maxsize=1)
def c_defaults() -> dict[str, Any]:
    """ir_config's members as ir_config_init fills them, by member name."""
    ffi, lib = _native.load()
    c = ffi.new("ir_config *")
    lib.ir_config_init(c)
    out: dict[str, Any] = {}
    for name, f in ffi.typeof("ir_config").fields:
        v = getattr(c, name)
        if f.type.kind == "pointer":
            v = ffi.string(v).decode() if v != ffi.NULL else None
        out[name] = v
    return out


def c_param(name: str) -> dict[str, Any] | None:
    """The table's row for a ServerConfig field (by its ir_config member), or None."""
    member = C_FIELDS.get(name, name)
    return next((p for p in c_params() if p["field"] == member), None)


def _c(name: str) -> Any:
    """The C default of a ServerConfig field (ir_config_init's), in the field's type."""
    v = c_defaults()[C_FIELDS.get(name, name)]
    p = c_param(name)
    return bool(v) if p is not None and p["type"] == "bool" else v


def _cd(name: str) -> Any:
    """A dataclass field whose default is the C default, read when a ServerConfig is made
    (so that importing this module does not need libinreplay)."""
    return field(default_factory=lambda: _c(name))


def c_bounds(name: str) -> tuple[int | float, int | float] | None:
    """(min, max) of a ServerConfig field from the C table (max inf when unbounded), or
    None when the table gives no bounds for it."""
    p = c_param(name)
    if p is None or p["min"] is None:
        return None
    return p["min"], float("inf") if p["max"] is None else p["max"]


@dataclass
class ServerConfig:
    """Everything `pyctl start` can set. TOML keys are the field names."""

    stack: str = _cd("stack")
    """Network stack: "kernel" (epoll on kernel sockets) or "dpdk" (userspace TCP/IP)."""
    listen: str = field(default_factory=lambda: f"{_c('bind')}:{_c('listen_port')}")
    """HOST:PORT to accept clients on; port 0 lets the kernel choose."""
    capacity: int = 0
    """If > 0, create the table `table` with this many slots at start-up."""
    table: str = "replay"
    """Name of the table created at start-up when `capacity` > 0."""
    alpha: float = _cd("alpha")
    """Priority exponent of the start-up table: stored priority = (p + epsilon) ** alpha."""
    beta: float = _cd("beta")
    """Default importance-sampling exponent of the start-up table."""
    epsilon: float = _cd("epsilon")
    """Added to every raw priority of the start-up table before the exponent."""
    min_size: int = _cd("min_size")
    """Rate limiter of the start-up table: sampling waits until it holds this many items."""
    samples_per_insert: float = _cd("samples_per_insert")
    """Rate limiter: sampled items per inserted item (0 = no ratio limit), as Reverb's."""
    error_buffer: float = _cd("error_buffer")
    """Rate limiter: how far samples may run ahead or behind the ratio (0 = max(1, rate))."""
    maxbytes: int = _cd("maxbytes")
    """Arena size in bytes for the start-up table and for REPLAY.CREATE without MAXBYTES."""
    fanout: int = _cd("fanout")
    """Sum-tree fanout K (2, 4, 8, 16 or 32); 0 means the measured default."""
    seed: int = _cd("seed")
    """Seed for the samplers' random numbers; 0 seeds from the clock."""
    maxclients: int = _cd("maxclients")
    """Connections beyond this get "-ERR max number of clients reached"."""
    proto_max_bulk_len: int = _cd("proto_max_bulk_len")
    """Largest bulk string a client may send, in bytes (Redis's proto-max-bulk-len)."""
    client_query_buffer_limit: int = _cd("client_query_buffer_limit")
    """Largest amount of unparsed input per client, in bytes."""
    tcp_backlog: int = _cd("tcp_backlog")
    """listen() backlog."""
    daemon: bool = False
    """Detach and run in the background; `pyctl stop` ends it."""
    logfile: str = ""
    """Where a daemon writes its log; empty means <rundir>/<port>.log."""
    verbose: bool = _cd("verbose")
    """Log every connection and protocol error."""
    requirepass: str = _cd("requirepass")
    """Password for AUTH; empty means protected mode: only loopback and client_subnet may talk."""
    client_subnet: str = _cd("client_subnet")
    """A.B.C.D/NN of clients accepted without a password (protected mode), e.g. the actors'."""
    maxmemory: int = _cd("maxmemory")
    """Bytes; beyond it writes get -OOM and reads keep working. 0 means no limit."""
    client_output_buffer_limit: int = _cd("client_output_buffer_limit")
    """Bytes of replies pending for one client before it is disconnected (a client that
    pipelines huge REPLAY.SAMPLEs and never reads); 0 means no limit."""
    timeout: int = _cd("timeout")
    """Close clients idle this many seconds (Redis's timeout); 0 means never."""
    request_timeout_ms: int = _cd("request_timeout_ms")
    """A request that has started arriving must complete within this (trickling clients)."""
    tcp_keepalive: int = _cd("tcp_keepalive")
    """TCP keepalive interval in seconds, so half-open connections are reclaimed; 0 = off."""
    dir: str = ""
    """Directory SAVE and BGSAVE write snapshots to; it must exist and be writable. Empty
    means a data directory of this server's own under the run directory,
    <rundir>/data/<host>-<port>, created at start."""
    restore: str = ""
    """Directory to load the newest complete snapshot from at start; with none there the
    server refuses to start (empty: start empty)."""
    restore_if_present: str = ""
    """Like `restore`, but start empty when the directory holds no snapshot (or does not
    exist); a corrupt snapshot still refuses. For automation that restarts a server."""
    save_on_shutdown: bool = False
    """SAVE a snapshot to `dir` before exiting on SIGTERM, SIGINT or SHUTDOWN."""
    # ---- the DPDK stack ------------------------------------------------------
    cores: str = ""
    """DPDK core list (e.g. "2-5" or "0,2"); the first is the network lcore. Default "0"."""
    port: int = _cd("port")
    """DPDK ethdev port id to serve on; -1 means the first port probed."""
    vdev: list[str] = field(default_factory=list)
    """EAL virtual devices, e.g. "net_af_packet0,iface=veth0" (implies --no-pci)."""
    ip: str = ""
    """A.B.C.D/NN the userspace TCP/IP stack answers on (required with --stack dpdk)."""
    listen_port: int = _cd("listen_port")
    """TCP port of the DPDK stack."""
    queues: int = 1
    """RX/TX queue pairs; one lwIP stack per process serves exactly one."""
    mbufs: int = _cd("mbufs")
    """Size of the mbuf pool; 0 sizes it from maxclients."""
    hugepages: int = 0
    """Reserve this many free 2 MB hugepages (and mount hugetlbfs) before starting."""
    netns: str = ""
    """Run inside this network namespace (see `pyctl netns up`)."""
    file_prefix: str = "inreplay"
    """EAL --file-prefix: names hugepage files and the telemetry socket directory."""
    busy_poll: bool = _cd("busy_poll")
    """DPDK: poll without ever napping (lowest latency, 100% of the network core). Kernel
    stack: poll epoll without sleeping while traffic flows, back off when idle."""
    mtu: int = _cd("mtu")
    """DPDK: IP MTU of the port (1500 Ethernet, 9000 jumbo); 0 = the interface's MTU."""
    # ---- replay groups (Scaling out) -----------------------------------------
    shards: int = 1
    """Start a replay group of this many servers on this box. Kernel stack: ports P..P+N-1
    of --listen, each pinned to its own core. DPDK: one process per core of --cores, each
    with its own lwIP stack on --ip + i (the port's frames reach every member)."""
    shard_group: str = ""
    """Every member's HOST:PORT, comma-separated in shard order, for a group that spans
    boxes: each box starts its own member with --shard-index."""
    shard_index: int = _cd("shard_index")
    """This server's place in --shard-group (0-based); its ids start at index << 48."""

    # ---- derived -------------------------------------------------------------
    @property
    def host(self) -> str:
        """The address clients reach: the lwIP address on DPDK (the first shard's), else
        --listen's host."""
        if self.stack == "dpdk":
            return self.ip.split(",")[0].split("/")[0]
        return split_listen(self.listen)[0]

    @property
    def tcp_port(self) -> int:
        return self.listen_port if self.stack == "dpdk" else split_listen(self.listen)[1]

    def core_list(self) -> list[int]:
        """The --cores list expanded ("0-2,5" -> [0, 1, 2, 5])."""
        out: list[int] = []
        for part in (self.cores or "0").split(","):
            lo, _, hi = part.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()) or (hi and int(hi) < int(lo)):
                raise ConfigError(f"--cores: {self.cores!r} is not a core list like 2-5 or 0,2")
            out += range(int(lo), int(hi or lo) + 1)
        return out

    def eal_args(self) -> list[str]:
        """EAL arguments for the DPDK stack."""
        args = ["-l", self.cores or "0", "--file-prefix", self.file_prefix]
        for v in self.vdev:
            args += [f"--vdev={v}"]
        if self.vdev:
            args.append("--no-pci")
        if not self.verbose:
            args.append("--log-level=error")  # EAL's start-up chatter only with --verbose
        return args

    def validate(self) -> None:
        """Raise ConfigError naming the first bad setting."""
        split_listen(self.listen)
        if self.stack not in ("kernel", "dpdk"):
            raise ConfigError(f"stack: must be 'kernel' or 'dpdk', not {self.stack!r}")
        if self.capacity < 0:
            raise ConfigError("--capacity: must be >= 0")
        if self.fanout not in (0, 2, 4, 8, 16, 32):
            raise ConfigError("--fanout: must be one of 2, 4, 8, 16, 32 (or 0 for the default)")
        for name in ("alpha", "beta", "epsilon"):
            v = getattr(self, name)
            lo = c_bounds(name)[0]  # type: ignore[index]
            if not (v >= lo and v != float("inf")):
                raise ConfigError(f"{flag(name)}: must be a finite number >= {lo}")
        self._validate_limiter()
        if not self.table or len(self.table.encode()) > 200:
            raise ConfigError("--table: must be 1 to 200 bytes")
        if self.seed < 0:
            raise ConfigError("--seed: must be >= 0")
        if self.client_output_buffer_limit < 0:
            raise ConfigError("--client-output-buffer-limit: must be >= 0")
        if self.client_subnet:
            try:
                ipaddress.ip_network(self.client_subnet, strict=False)
            except ValueError:
                raise ConfigError(f"--client-subnet: {self.client_subnet!r} is not "
                                  "an address/prefix like 10.0.0.0/24") from None
        if self.restore and not Path(self.restore).is_dir():
            raise ConfigError(f"--restore: {self.restore}: no such directory")
        if self.restore and self.restore_if_present:
            raise ConfigError("--restore-if-present: give it or --restore, not both")
        if self.mtu and not 576 <= self.mtu <= 9600:
            raise ConfigError(f"--mtu {self.mtu}: choose 576-9600 (1500 Ethernet, 9000 jumbo "
                              "frames), or 0 for the interface's MTU")
        self._validate_group()
        if self.stack == "dpdk":
            self._validate_dpdk()
        self._validate_bounds()

    def _validate_bounds(self) -> None:
        """Integer settings within the C table's bounds (after the checks with more
        specific messages above)."""
        for f in fields(self):
            v = getattr(self, f.name)
            bounds = c_bounds(f.name)
            if bounds is None or isinstance(v, bool) or not isinstance(v, int):
                continue
            lo, hi = bounds
            if not lo <= v <= hi:
                raise ConfigError(f"{flag(f.name)}: must be between {lo} and {hi}, got {v}")

    def group_members(self) -> list[str]:
        """--shard-group's members, in shard order (empty for a standalone server)."""
        return [m.strip() for m in self.shard_group.split(",") if m.strip()]

    def _validate_group(self) -> None:
        if not 1 <= self.shards <= 1024:
            raise ConfigError(f"--shards {self.shards}: choose 1 to 1024")
        if self.shards > 1 and self.shard_group:
            raise ConfigError("--shards starts a whole group on this box; --shard-group names "
                              "the members of a group across boxes: give one of them")
        if self.shards > 1 and self.stack == "dpdk":
            try:
                ncores = len(self.core_list())
            except ConfigError:
                ncores = self.shards  # reported by the DPDK checks
            if ncores < self.shards:
                raise ConfigError(f"--shards {self.shards}: on DPDK every shard runs on its own "
                                  f"core of --cores, which lists {ncores}: give {self.shards} "
                                  "cores (e.g. --cores 0-1)")
        members = self.group_members()
        for m in members:
            try:
                split_listen(m)
            except ConfigError:
                raise ConfigError(f"--shard-group: {m!r} is not HOST:PORT") from None
        n = max(1, len(members))
        if not 0 <= self.shard_index < n:
            raise ConfigError(f"--shard-index {self.shard_index}: the group has {n} member"
                              f"{'s' if n != 1 else ''} (0-{n - 1})")

    def _validate_limiter(self) -> None:
        """The start-up table's rate limiter, with REPLAY.CREATE's rules."""
        if self.min_size < 0:
            raise ConfigError("--min-size: must be >= 0")
        if self.capacity and self.min_size > self.capacity:
            raise ConfigError(f"--min-size {self.min_size}: must be at most --capacity "
                              f"{self.capacity}")
        for name in ("samples_per_insert", "error_buffer"):
            v = getattr(self, name)
            lo = c_bounds(name)[0]  # type: ignore[index]
            if not (v >= lo and v != float("inf")):
                raise ConfigError(f"{flag(name)}: must be a finite number >= {lo}")
        if self.error_buffer and not self.samples_per_insert:
            raise ConfigError("--error-buffer: needs --samples-per-insert")
        least = max(1.0, self.samples_per_insert)
        if self.samples_per_insert and self.error_buffer and self.error_buffer < least:
            raise ConfigError(f"--error-buffer {self.error_buffer:g}: must be at least "
                              f"max(1, --samples-per-insert) = {least:g}")

    def _validate_dpdk(self) -> None:
        problems = self.dpdk_problems()
        if problems:
            raise ConfigError("\n".join(problems))

    def dpdk_problems(self) -> list[str]:
        """Every setting the DPDK stack cannot use, each in one line naming its flag."""
        problems = []
        try:
            cores = self.core_list()
        except ConfigError as e:
            problems.append(str(e))
            cores = []
        n = os.cpu_count() or 1
        if [c for c in cores if c >= n]:
            problems.append(f"--cores {self.cores}: this machine has cores 0-{n - 1}")
        if not self.ip:
            problems.append("--ip: required with the DPDK stack (the address lwIP answers on, "
                            "e.g. --ip 10.77.0.2/24)")
        else:
            for ip in self.ip.split(","):
                try:
                    iface = ipaddress.ip_interface(ip)
                    if iface.version != 4 or "/" not in ip:
                        problems.append(f"--ip: {ip!r}: give an IPv4 address with its prefix, "
                                        "e.g. 10.77.0.2/24")
                except ValueError:
                    problems.append(f"--ip: {ip!r} is not an IPv4 address/prefix")
            n_ips = len(self.ip.split(","))
            if n_ips > 1 and n_ips != self.shards:
                problems.append(f"--ip lists {n_ips} addresses for --shards {self.shards}: give "
                                "one per shard, or one address (shard i answers on it + i)")
        if not 0 <= self.listen_port <= 65535:
            problems.append(f"--listen-port: must be 0-65535, got {self.listen_port}")
        if self.queues != 1:
            problems.append("--queues: the lwIP stack keeps global state, so one process "
                            "serves one queue pair; run one appliance per queue instead")
        if self.port < -1:
            problems.append("--port: must be a DPDK port id >= 0")
        if not self.file_prefix.replace("-", "").replace("_", "").isalnum():
            problems.append("--file-prefix: letters, digits, - and _ only")
        for v in self.vdev:
            if not v or " " in v:
                problems.append(f"--vdev: {v!r} is not an EAL device string "
                                "like net_af_packet0,iface=eth1")
        return problems

    def allowed_subnet(self) -> str:
        """client_subnet, defaulting on DPDK to the --ip network when no password is set."""
        if self.client_subnet or self.requirepass or self.stack != "dpdk":
            return self.client_subnet
        return str(ipaddress.ip_interface(self.ip).network)


def flag(name: str) -> str:
    """The command-line flag for a field name."""
    return "--" + name.replace("_", "-")


DEFAULT_HOST = "127.0.0.1"


def split_listen(listen: str, default_host: str = DEFAULT_HOST) -> tuple[str, int]:
    """HOST:PORT, [IPv6]:PORT, :PORT or PORT -> (address, port); a host name is resolved
    (IPv4 first). A missing host is ``default_host`` ("" to match any address). Raises
    ConfigError naming --listen."""
    text = listen.strip()
    if text.isdigit():
        host, port_s = "", text
    else:
        host, sep, port_s = text.rpartition(":")
        if not sep or not port_s.isdigit() or (host.count(":") and not host.startswith("[")):
            raise ConfigError(f"--listen: expected HOST:PORT, :PORT or PORT, got {listen!r}")
    host = host.strip("[]")
    port = int(port_s)
    if not 0 <= port <= 65535:
        raise ConfigError(f"--listen: port must be 0-65535, got {port}")
    if not host:
        return default_host, port
    try:
        ipaddress.ip_address(host)
    except ValueError:
        host = _resolve(host)
    return host, port


def _resolve(name: str) -> str:
    """A host name's address (IPv4 preferred), or ConfigError naming --listen."""
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        reason = e.strerror if isinstance(e, socket.gaierror) else str(e)
        raise ConfigError(f"--listen: cannot resolve host {name!r}: {reason}") from None
    infos.sort(key=lambda i: i[0] != socket.AF_INET)
    return str(infos[0][4][0])


def normalize_listen(listen: str) -> str:
    """--listen in the form the server takes: ADDRESS:PORT ([ADDRESS]:PORT for IPv6)."""
    host, port = split_listen(listen)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@lru_cache(maxsize=1)
def size_fields() -> tuple[str, ...]:
    """Settings in bytes, the C table's memory parameters (and the normal class's
    client-output-buffer-limit): flags and TOML take a size with a unit (see parse_size)."""
    return tuple(f.name for f in fields(ServerConfig)
                 if ((p := c_param(f.name)) is not None and p["type"] == "memory")
                 or f.name == "client_output_buffer_limit")
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2, "g": 1000**3,
          "gb": 1024**3}
_SIZE = re.compile(r"(-?\d+)([a-z]*)", re.I)


def parse_size(text: str | int) -> int:
    """Bytes, as Redis's memtoll reads them: an integer with an optional unit, any case:
    b, k (1000), kb (1024), m (1000^2), mb (1024^2), g (1000^3), gb (1024^3). Unlike
    Redis, a unit without a number ("gb") and "" are refused rather than read as 0."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    m = _SIZE.fullmatch(str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"{text!r} is not a size like 4096, 64mb or 1gb (units b, k, kb, m, "
                         f"mb, g, gb)")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


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
        if name in size_fields() and isinstance(value, str):
            try:
                value = parse_size(value)
            except ValueError as e:
                raise ConfigError(f"--config: {p}: {key}: {e}") from None
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if want is list and not (isinstance(value, list) and all(isinstance(v, str)
                                                                  for v in value)):
            raise ConfigError(f"--config: {p}: {key} must be a list of strings")
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            kind = ("an integer or a size string like \"1GB\"" if name in size_fields()
                    else want.__name__)
            raise ConfigError(f"--config: {p}: {key} must be {kind}")
        out[name] = value
    return out


def build(toml_path: str | None, overrides: dict[str, Any], validate: bool = True
          ) -> ServerConfig:
    """Defaults, then the TOML file, then flags that were given."""
    values: dict[str, Any] = {}
    if toml_path:
        values.update(load_toml(toml_path))
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        cfg = dataclasses.replace(ServerConfig(), **values)
    except _native.NativeLibraryMissingError as e:  # the defaults are the library's
        raise ConfigError(str(e)) from None
    if validate:
        cfg.validate()
    return cfg
