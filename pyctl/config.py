"""Server configuration: one dataclass, filled from defaults, a TOML file and flags.

The defaults and bounds of every setting the C server also has come from the C
parameter table (fstack_redis/config.c) through cffi: ``ir_config_init`` for the
defaults, ``ir_config_params_json`` for types, bounds and docs. Nothing here
repeats them. `pyctl start`'s options are generated from the same (flag_specs): a
C-backed setting's help is its row's doc and default, a pyctl-only setting's is the
``help`` in its ServerConfig field's metadata, written once.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import re
import socket
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from pyctl import _native, files


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the setting."""


C_FIELDS = {"maxbytes": "default_maxbytes", "alpha": "table_alpha", "beta": "table_beta",
            "epsilon": "table_epsilon", "min_size": "table_min_size",
            "samples_per_insert": "table_samples_per_insert",
            "error_buffer": "table_error_buffer", "port": "dpdk_port", "mbufs": "dpdk_mbufs",
            "listen_port": "port"}
"""ServerConfig fields whose ir_config member has another name (the rest: the same)."""
OWN_DEFAULTS = ("dir", "shm_socket")
"""ServerConfig fields with a C row whose default is pyctl's own: dir ("" = a data
directory of the server's own under the run directory, where C's is "."), shm_socket
("auto" = a socket in the run directory, which only its owner can enter, where C's is
"" = none)."""


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


def _cd(name: str, **meta: Any) -> Any:
    """A setting the C server has: its default (read when a ServerConfig is made, so that
    importing this module does not need libinreplay), type, bounds and doc are its C row's.
    ``meta`` only adds what the flag needs beyond the row (see FLAG_META)."""
    return field(default_factory=lambda: _c(name), metadata=meta)


def _own(default: Any = dataclasses.MISSING, *, help: str, **meta: Any) -> Any:
    """A pyctl-only setting, described here once: ``help`` is its documentation, the
    flag's help text and the TOML key's meaning (see FLAG_META for the rest of ``meta``)."""
    if "default_factory" in meta:
        return field(default_factory=meta.pop("default_factory"), metadata={"help": help, **meta})
    return field(default=default, metadata={"help": help, **meta})


FLAG_META = {
    "help": "a pyctl-only setting's description (C-backed ones have the C row's doc instead)",
    "note": "appended to the C row's doc: what the flag sets when the row says more",
    "default_text": "how the default reads when its value does not say it",
    "bounds": "(min, max) of a pyctl-only number (max None: unbounded)",
    "parse": "a function from the flag's text to the value, raising ValueError",
    "metavar": "the flag's placeholder in --help",
    "group": "the --help group: 'groups' or 'dpdk' (see FLAG_GROUPS)",
    "dpdk_only": "giving the flag implies --stack dpdk",
}
"""The metadata a ServerConfig field may carry for its flag."""
UNIX_PATH_MAX = 107
"""The longest Unix socket path (sockaddr_un's sun_path, 108 bytes with its NUL)."""
DEFAULT_HUGEPAGES = 256
"""2 MB hugepages reserved for the DPDK stack when --hugepages does not say."""
FLAG_GROUPS = {"groups": "replay groups (see 'Replay groups and sharding' in the docs)",
               "dpdk": "DPDK stack (--stack dpdk)"}


def mtu_range() -> tuple[int, int]:
    """The IP MTUs the DPDK port takes (IR_MTU_MIN, IR_MTU_MAX in inreplay.h)."""
    _, lib = _native.load()
    return int(lib.IR_MTU_MIN), int(lib.IR_MTU_MAX)


def c_bounds(name: str) -> tuple[int | float, int | float] | None:
    """(min, max) of a ServerConfig field from the C table (max inf when unbounded), or
    None when the table gives no bounds for it."""
    p = c_param(name)
    if p is None or p["min"] is None:
        return None
    return p["min"], float("inf") if p["max"] is None else p["max"]


def _listen_text(text: str) -> str:
    """--listen of start: a host name resolved, no host meaning 127.0.0.1."""
    try:
        return normalize_listen(text)
    except ConfigError as e:
        raise ValueError(str(e).removeprefix("--listen: ")) from None


SERVERS = ("inreplay", "redis")


def _server_text(text: str) -> str:
    """--server: inreplay (the native server) or redis (stock redis-server + the module)."""
    if text not in SERVERS:
        raise ValueError(f"must be one of {', '.join(SERVERS)}, not {text!r}")
    return text


@dataclass
class ServerConfig:
    """Everything `pyctl start` can set. TOML keys are the field names, flags the field
    names with "-" (see flag_specs). A field made with _cd is described by its row in the
    C parameter table; one made with _own by its ``help`` here."""

    stack: str = _cd("stack")
    listen: str = _own(help="HOST:PORT, :PORT or PORT to accept clients on; a host name is "
                            "resolved, port 0 picks a free one",
                       default_factory=lambda: f"{_c('bind')}:{_c('listen_port')}",
                       parse=_listen_text)
    unixsocket: str = _cd("unixsocket", metavar="PATH")
    unixsocketperm: int = _cd("unixsocketperm", metavar="OCTAL")
    shm_socket: str = field(default="auto", metadata={  # see OWN_DEFAULTS
        "note": "; auto = <rundir>/<host>-<port>.shm (only its owner can enter the run "
                "directory), none = no shared memory",
        "default_text": "auto", "metavar": "PATH|auto|none"})
    shm_socketperm: int = _cd("shm_socketperm", metavar="OCTAL")
    shm_ring_size: int = _cd("shm_ring_size")
    capacity: int = _own(0, help="if > 0, create the table --table with this many slots at "
                                 "start-up", bounds=(0, None))
    table: str = _own("replay", help="name of the table created at start-up when --capacity "
                                     "> 0", metavar="NAME")
    alpha: float = _cd("alpha")
    beta: float = _cd("beta")
    epsilon: float = _cd("epsilon")
    min_size: int = _cd("min_size")
    samples_per_insert: float = _cd("samples_per_insert")
    error_buffer: float = _cd("error_buffer")
    maxbytes: int = _cd("maxbytes")
    fanout: int = _cd("fanout")
    seed: int = _cd("seed")
    maxclients: int = _cd("maxclients")
    proto_max_bulk_len: int = _cd("proto_max_bulk_len")
    client_query_buffer_limit: int = _cd("client_query_buffer_limit")
    tcp_backlog: int = _cd("tcp_backlog")
    server: str = _own("inreplay", help="inreplay (the native server) or redis: Debian's stock "
                       "redis-server with the REPLAY.* module (pyctl module-path), in the "
                       "foreground, where only listen, seed, fanout, maxbytes, requirepass, "
                       "maxmemory, unixsocket and unixsocketperm apply", parse=_server_text,
                       metavar="inreplay|redis")
    daemon: bool = _own(False, help="detach and run in the background; `pyctl stop` ends it")
    logfile: str = _own("", help="where a daemon writes its log",
                        default_text="<rundir>/<host>-<port>.log", metavar="FILE")
    verbose: bool = _cd("verbose")
    requirepass: str = _cd("requirepass", metavar="PASSWORD",
                           note=" (the process list shows a flag: prefer --requirepass-file or "
                                "$INREPLAY_REQUIREPASS)")
    requirepass_file: str = _own("", help="read requirepass from the first line of this file "
                                          "(keep it mode 0600) rather than from the command "
                                          "line, which the process list shows; without it or "
                                          "--requirepass, $INREPLAY_REQUIREPASS is the "
                                          "password if set", metavar="PATH")
    client_subnet: str = _cd("client_subnet", metavar="A.B.C.D/NN")
    protected_mode: bool = _cd("protected_mode", metavar="yes|no")
    aclfile: str = _cd("aclfile", metavar="FILE")
    enable_debug_command: str = _cd("enable_debug_command", metavar="no|yes|local")
    enable_protected_configs: str = _cd("enable_protected_configs", metavar="no|yes|local")
    maxmemory: int = _cd("maxmemory")
    client_output_buffer_limit: int = _cd(
        "client_output_buffer_limit",
        note="; this flag sets the normal class's hard limit, 0 = none")
    timeout: int = _cd("timeout", metavar="SECONDS")
    request_timeout_ms: int = _cd("request_timeout_ms", metavar="MS")
    tcp_keepalive: int = _cd("tcp_keepalive", metavar="SECONDS")
    dir: str = field(default="", metadata={  # "" here, "." in C: see OWN_DEFAULTS
        "default_text": "<rundir>/data/<host>-<port>, created at start", "metavar": "DIR"})
    appendonly: bool = _cd("appendonly")
    appendfilename: str = _cd("appendfilename", metavar="NAME")
    appenddirname: str = _cd("appenddirname", metavar="NAME")
    restore: str = _own("", help="directory to load the newest complete snapshot from at "
                                 "start; with none there the server refuses to start",
                        metavar="DIR")
    restore_if_present: str = _own("", help="like --restore, but start empty when the "
                                            "directory holds no snapshot (or does not exist); "
                                            "a corrupt snapshot still refuses. For automation "
                                            "that restarts a server", metavar="DIR")
    save_on_shutdown: bool = _own(False, help="SAVE a snapshot to --dir before exiting on "
                                              "SIGTERM, SIGINT or SHUTDOWN")
    # ---- the DPDK stack ------------------------------------------------------
    cores: str = _own("", help="DPDK core list, e.g. 2-5 or 0,2; the first runs the network "
                               "stack", default_text="0", group="dpdk", dpdk_only=True,
                      metavar="LIST")
    port: int = _cd("port", group="dpdk", dpdk_only=True)
    vdev: list[str] = field(default_factory=list, metadata={
        "help": "EAL virtual device, e.g. net_af_packet0,iface=veth0 (repeatable; implies "
                "--no-pci)", "group": "dpdk", "dpdk_only": True, "metavar": "DEV"})
    ip: str = _own("", help="A.B.C.D/NN the userspace TCP/IP stack answers on (required with "
                            "--stack dpdk); with --shards N one per shard (comma-separated), "
                            "or the first (shard i answers on it + i)", group="dpdk",
                   dpdk_only=True, metavar="A.B.C.D/NN")
    listen_port: int = _cd("listen_port", group="dpdk", dpdk_only=True)
    queues: int = _own(1, help="RX/TX queue pairs; one lwIP stack per process serves exactly "
                               "one", bounds=(0, None), group="dpdk", dpdk_only=True)
    mbufs: int = _cd("mbufs", group="dpdk", dpdk_only=True)
    hugepages: int = _own(0, help="make sure this many 2 MB hugepages are free before "
                                  "starting, reserving them (and mounting hugetlbfs) as "
                                  "needed; 0 = the default",
                          default_text=str(DEFAULT_HUGEPAGES), bounds=(0, None), group="dpdk",
                          dpdk_only=True)
    netns: str = _own("", help="run inside this network namespace (see `pyctl netns up`)",
                      group="dpdk", metavar="NAME")
    file_prefix: str = _own("inreplay", help="EAL --file-prefix: names hugepage files and the "
                                             "telemetry socket directory", group="dpdk",
                            dpdk_only=True, metavar="PREFIX")
    busy_poll: bool = _cd("busy_poll")
    mtu: int = _cd("mtu", group="dpdk", dpdk_only=True)
    # ---- replay groups (Scaling out) -----------------------------------------
    shards: int = _own(1, help="start a replay group of this many servers on this box. Kernel "
                               "stack: ports P..P+N-1 of --listen, each pinned to its own core. "
                               "DPDK: one process per core of --cores, each with its own lwIP "
                               "stack on --ip + i", bounds=(0, None), group="groups")
    shard_group: str = _own("", help="every member's HOST:PORT, comma-separated in shard "
                                     "order, for a group that spans boxes: each box starts its "
                                     "own member with --shard-index", group="groups",
                            metavar="HOST:PORT,...")
    shard_index: int = _cd("shard_index", group="groups")
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
        self._validate_startup_table()
        if not self.table or len(self.table.encode()) > 200:
            raise ConfigError("--table: must be 1 to 200 bytes")
        if self.seed < 0:
            raise ConfigError("--seed: must be >= 0")
        if self.client_output_buffer_limit < 0:
            raise ConfigError("--client-output-buffer-limit: must be >= 0")
        self._validate_unixsocket()
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
        lo, hi = mtu_range()
        if self.mtu and not lo <= self.mtu <= hi:
            raise ConfigError(f"--mtu {self.mtu}: choose {lo}-{hi} (1500 Ethernet, 9000 jumbo "
                              "frames), or 0 for the interface's MTU")
        self._validate_group()
        if self.stack == "dpdk":
            self._validate_dpdk()
        self._validate_bounds()

    def _validate_unixsocket(self) -> None:
        """The Unix socket: its path must fit a sockaddr_un (the server says so too, but
        only once it runs), and one server owns it (a group's shards would replace each
        other's)."""
        if not self.unixsocket:
            return
        if len(os.fsencode(self.unixsocket)) > UNIX_PATH_MAX:
            raise ConfigError(f"--unixsocket: the path is {len(os.fsencode(self.unixsocket))} "
                              f"bytes, a Unix socket path takes at most {UNIX_PATH_MAX}")
        if self.shards > 1:
            raise ConfigError("--unixsocket: one server listens on a Unix socket path; "
                              "--shards starts several (start each shard with its own path)")

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
                if (p := c_param(f.name)) is not None and p.get("octal"):  # unixsocketperm
                    raise ConfigError(f"{flag(f.name)}: must be between {lo:o} and {int(hi):o} "
                                      f"(octal), got {v:o}")
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
        if members:
            me = members[self.shard_index]
            mhost, mport = split_listen(me)
            if self.tcp_port != mport or self.host not in (mhost, *WILDCARD_HOSTS):
                where = (f"--ip {self.ip or '(none)'} --listen-port {self.listen_port}"
                         if self.stack == "dpdk" else f"--listen {self.listen}")
                raise ConfigError(f"--shard-index {self.shard_index}: --shard-group names this "
                                  f"member {me}, but {where} is another address: listen on "
                                  f"{me} (or on every address with its port {mport})")

    STARTUP_TABLE_ONLY = ("table", "alpha", "beta", "epsilon", "min_size", "samples_per_insert",
                          "error_buffer")
    """Settings of the start-up table alone (REPLAY.CREATE has its own defaults)."""

    def _validate_startup_table(self) -> None:
        """Refuse start-up table settings that would be dropped without a word: with no
        --capacity there is no start-up table; --restore brings back the saved tables."""
        given = [flag(n) for n in self.STARTUP_TABLE_ONLY
                 if getattr(self, n) != field_default(n)]
        if self.capacity:
            given.insert(0, "--capacity")
        if self.restore and given:
            raise ConfigError(f"{given[0]}: --restore brings the saved tables back as they were; "
                              f"drop {', '.join(given)} (REPLAY.CREATE makes new tables), or use "
                              "--restore-if-present to create the table when nothing is saved")
        if not self.capacity and given:
            raise ConfigError(f"{given[0]}: sets the table created at start-up, which only "
                              "--capacity N creates: give --capacity (or use REPLAY.CREATE)")

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
        """client_subnet as given: on DPDK nothing is trusted by default (no loopback
        there), so without a password clients need --client-subnet or a password."""
        return self.client_subnet


def parse_yes_no(text: str) -> bool:
    """yes/no (Redis's words for a boolean setting) as a bool."""
    t = text.strip().lower()
    if t in ("yes", "no"):
        return t == "yes"
    raise ValueError(f"expected yes or no, got {text!r}")


def flag(name: str) -> str:
    """The command-line flag for a field name."""
    return "--" + name.replace("_", "-")


DEFAULT_HOST = "127.0.0.1"
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
"""Listen addresses that name no one host (every address of the box)."""


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
        if (p := c_param(name)) is not None and p.get("octal") and isinstance(value, str):
            try:  # unixsocketperm = "700", as redis.conf writes it (or TOML's 0o700)
                value = _octal_parser(0, None)(value)
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
    cfg = with_password(cfg)
    if validate:
        cfg.validate()
    return cfg


REQUIREPASS_ENV = "INREPLAY_REQUIREPASS"
"""The environment variable `pyctl start` reads requirepass from when no flag gives it."""


def with_password(cfg: ServerConfig) -> ServerConfig:
    """cfg with requirepass from its one source: --requirepass (or the TOML key), else the
    file --requirepass-file names, else $INREPLAY_REQUIREPASS; giving both the flag and the
    file is an error."""
    if cfg.requirepass_file:
        path = cfg.requirepass_file
        if cfg.requirepass:
            raise ConfigError(f"--requirepass-file {path}: the password is given twice: drop "
                              f"--requirepass (or requirepass in the --config file)")
        try:
            password = files.read_secret(path)
        except (OSError, UnicodeError) as e:
            raise ConfigError(f"--requirepass-file {path}: "
                              f"{getattr(e, 'strerror', None) or e}") from None
        if not password:
            raise ConfigError(f"--requirepass-file {path}: the first line is empty")
        return dataclasses.replace(cfg, requirepass=password)
    if not cfg.requirepass and os.environ.get(REQUIREPASS_ENV):
        return dataclasses.replace(cfg, requirepass=os.environ[REQUIREPASS_ENV])
    return cfg


# ---- the flags of `pyctl start`, generated from ServerConfig and the C table -----------

@dataclass(frozen=True)
class FlagSpec:
    """One `pyctl start` option, made from one ServerConfig field (see flag_specs)."""

    name: str
    """The ServerConfig field (and TOML key)."""
    flag: str
    help: str
    """Plain text: the C row's doc (or the field's own help) and "(default X)"."""
    action: str
    """"store", "store_true" (bool settings) or "append" (lists)."""
    parse: Callable[[str], Any] | None
    """The flag's text to the value; raises ValueError with a one-line reason."""
    choices: tuple[str, ...] | None
    metavar: str | None
    group: str | None
    """A key of FLAG_GROUPS, or None for the main options."""
    dpdk_only: bool


def format_size(n: int) -> str:
    """Bytes as an operator writes them (parse_size reads them back): 1gb, 512mb, 64kb, or
    plain bytes when no unit divides them."""
    for unit, mult in (("gb", 1024**3), ("mb", 1024**2), ("kb", 1024)):
        if n and n % mult == 0:
            return f"{n // mult}{unit}"
    return str(n)


def _field(name: str) -> dataclasses.Field[Any]:
    return next(f for f in fields(ServerConfig) if f.name == name)


def field_default(name: str) -> Any:
    """A field's default: the C default for a setting the C server has, else its own."""
    f = _field(name)
    if c_param(name) is not None and name not in OWN_DEFAULTS:
        return _c(name)
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def render(name: str, value: Any) -> str:
    """A value of field ``name`` as an operator reads and writes it: sizes with units,
    booleans as yes/no (as CONFIG GET shows them), numbers plainly, "" as none."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if (p := c_param(name)) is not None and p.get("octal"):
        return f"{value:o}"
    if name in size_fields():
        return format_size(value)
    if isinstance(value, float):
        return repr(value).removesuffix(".0")
    if value in ("", [], None):
        return "none"
    return str(value)


def flag_help(name: str) -> str:
    """The help text of a field's flag: the C row's doc (for a setting the C server has)
    or the field's own ``help``, then "(default X)" from the same source as the default."""
    meta = _field(name).metadata
    p = c_param(name)
    doc = p["doc"] + meta.get("note", "") if p is not None else meta["help"]
    return f"{doc} (default {meta.get('default_text') or render(name, field_default(name))})"


def _bounds_text(lo: float, hi: float | None, show: Callable[[Any], str]) -> str:
    if hi is None or hi == float("inf"):
        return f">= {show(lo)}"
    return f"between {show(lo)} and {show(hi)}"


def _int_parser(lo: int | None, hi: int | None) -> Callable[[str], int]:
    def parse_int(text: str) -> int:
        try:
            v = int(text, 0)
        except ValueError:
            try:
                v = int(text)
            except ValueError:
                raise ValueError(f"invalid integer: {text!r}") from None
        if lo is not None and not (lo <= v and (hi is None or v <= hi)):
            raise ValueError(f"must be {_bounds_text(lo, hi, str)}, got {v}")
        return v
    return parse_int


def _octal_parser(lo: int, hi: int | None) -> Callable[[str], int]:
    """An octal setting's flag (unixsocketperm), read as Redis reads it: base 8, digits
    only (700, or 0700)."""
    def parse_octal(text: str) -> int:
        try:
            v = int(text.removeprefix("0o"), 8)
        except ValueError:
            raise ValueError(f"{text!r} is not an octal number like 700") from None
        if not (lo <= v and (hi is None or v <= hi)):
            raise ValueError(f"must be {_bounds_text(lo, hi, '{:o}'.format)} (octal), got {text}")
        return v
    return parse_octal


def _float_parser(lo: float, hi: float | None) -> Callable[[str], float]:
    def parse_number(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise ValueError(f"invalid number: {text!r}") from None
        if not (lo <= v != float("inf") and (hi is None or v <= hi)):
            raise ValueError(f"must be a finite number {_bounds_text(lo, hi, '{:g}'.format)}, "
                             f"got {text}")
        return v
    return parse_number


def _size_parser(lo: int, hi: int | None) -> Callable[[str], int]:
    def parse_bytes(text: str) -> int:
        v = parse_size(text)
        if not (lo <= v and (hi is None or v <= hi)):
            raise ValueError(f"must be {_bounds_text(lo, hi, format_size)}, got {text}")
        return v
    return parse_bytes


_ANNOTATION_KIND = {"bool": "bool", "int": "int", "float": "double", "str": "string",
                    "list[str]": "list"}


def _spec(f: dataclasses.Field[Any]) -> FlagSpec:
    meta = f.metadata
    p = c_param(f.name)
    kind = p["type"] if p is not None else _ANNOTATION_KIND[str(f.type)]
    lo, hi = c_bounds(f.name) or meta.get("bounds") or (None, None)
    hi = None if hi == float("inf") else hi
    parse: Callable[[str], Any] | None = meta.get("parse")
    if f.name in size_fields():
        parse = _size_parser(int(lo or 0), None if hi is None else int(hi))
    elif kind == "int" and p is not None and p.get("octal"):
        parse = _octal_parser(int(lo or 0), None if hi is None else int(hi))
    elif kind == "int":
        parse = _int_parser(None if lo is None else int(lo), None if hi is None else int(hi))
    elif kind == "double":
        parse = _float_parser(0 if lo is None else lo, hi)
    elif kind == "bool" and field_default(f.name) is True:
        parse = parse_yes_no  # on by default: a bare flag could not turn it off
    return FlagSpec(
        name=f.name, flag=flag(f.name), help=flag_help(f.name),
        action="store" if kind == "bool" and parse is not None
        else {"bool": "store_true", "list": "append"}.get(kind, "store"), parse=parse,
        choices=tuple(p["values"].split(",")) if p is not None and kind == "enum" else None,
        metavar=meta.get("metavar") or ("SIZE" if f.name in size_fields() else None),
        group=meta.get("group"),
        dpdk_only=bool(meta.get("dpdk_only")))


@lru_cache(maxsize=1)
def flag_specs() -> tuple[FlagSpec, ...]:
    """Every `pyctl start` option but --config, one per ServerConfig field, in field order.
    A setting the C server has takes its help, type, bounds and choices from its C row
    (through cffi): changing the row changes the flag. Needs libinreplay."""
    return tuple(_spec(f) for f in fields(ServerConfig))


DPDK_ONLY = tuple(f.name for f in fields(ServerConfig) if f.metadata.get("dpdk_only"))
"""Settings only the DPDK stack has: giving one of their flags implies --stack dpdk."""
