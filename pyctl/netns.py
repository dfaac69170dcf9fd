"""The test topology (`pyctl netns up|down`) and host set-up for the DPDK stack.

    root namespace (clients)              namespace NAME (the appliance)
    ┌──────────────────────┐   veth    ┌───────────────────────────────────┐
    │ NAME-c  10.77.0.1/24 ├───────────┤ NAME-a  (DPDK af_packet attaches) │
    └──────────────────────┘           │   lwIP owns      10.77.0.2/24     │
                                       │   kernel address 10.77.0.3/24     │
                                       └───────────────────────────────────┘

The DPDK daemon's lwIP stack answers on the appliance address; the kernel
address on the same interface is for kernel-stack servers (inreplay --stack
kernel, stock redis-server) so that every system is reached over the same
veth path. Offloads are off on both ends (af_packet must not see GSO frames
or partial checksums). The veth MTU is 9000 by default (jumbo frames, as on
the data-centre networks a replay box sits on); `--mtu 1500` gives the
classic Ethernet size. `offloads=True` keeps the kernel's default offloads
(TSO/GSO/GRO, checksum): a pair made that way is for kernel-stack servers
only, the fair baseline for what a user of the kernel stack gets.

With `impair=` (`pyctl netns up --impair loss=5%,delay=20ms±5ms,...`) an
impairment bridge sits on the path, in a namespace of its own:

    root namespace        namespace NAME-br (bench/impair)        namespace NAME
    NAME-c 10.77.0.1 ─veth─ NAME-bc ⇄ impair ⇄ NAME-ba ─veth─ NAME-a 10.77.0.2/.3

The bridge (build/bench/impair: raw AF_PACKET sockets on NAME-bc and NAME-ba)
drops, delays, reorders and duplicates frames with the spec's probabilities,
reproducibly from a seed; the addresses are the same as without it. Spec items
are `[in.|out.]key=value`, `in.` for frames towards the appliance, `out.` for
its replies, no prefix for both: loss=P%, delay=Dms±Jms, reorder=P%[/Xms],
duplicate=P%, burst=P%/Ts (a loss burst that `pyctl netns impair --burst`
starts), drop=N[+M...] (exactly the Nth, Mth... TCP segment that takes sequence
space, data, SYN or FIN, counted from when the spec was set: `out.drop=1` after
a connection is up drops the server's first reply segment). This kernel has no
sch_netem, so the bridge stands in for netem.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from pyctl import files
from pyctl.config import mtu_range  # the DPDK port's: it attaches to this veth


class SetupError(RuntimeError):
    """A host set-up step failed; the message says what to do."""


DEFAULT_MTU = 9000
"""The test topology's veth MTU (jumbo frames)."""


@dataclass
class Topology:
    netns: str
    iface: str
    """The appliance's end of the veth, inside `netns` (what DPDK attaches to)."""
    peer: str
    """The clients' end of the veth, in the root namespace."""
    appliance_ip: str
    client_ip: str
    kernel_ip: str
    prefix: int
    mtu: int = DEFAULT_MTU
    offloads: bool = False
    """True: the kernel's default offloads are on (not usable by DPDK's af_packet)."""
    impair: dict[str, object] | None = None
    """The impairment bridge, if any: pid, netns, interfaces, spec, seed, files."""

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    def start_line(self, port: int = 6379, cores: str = "0-1") -> str:
        return (f"pyctl start --stack dpdk --netns {self.netns} --cores {cores} "
                f"--vdev net_af_packet0,iface={self.iface} --ip {self.appliance_ip}/{self.prefix} "
                f"--listen-port {port} --mtu {self.mtu} --hugepages 256")


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise SetupError(f"{what} needs root: run it with sudo")


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        r = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise SetupError(f"{cmd[0]} not found: install iproute2 and ethtool") from None
    if check and r.returncode != 0:
        raise SetupError(f"{' '.join(cmd)}: {r.stderr.strip() or r.stdout.strip()}")
    return r


def namespaces() -> list[str]:
    r = _run("ip", "netns", "list", check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def topology(name: str, subnet: str, mtu: int = DEFAULT_MTU, offloads: bool = False) -> Topology:
    net = ipaddress.ip_network(subnet)
    if net.num_addresses < 8:
        raise SetupError(f"--subnet {subnet}: needs at least a /29")
    hosts = list(net.hosts())
    short = name[:12]
    return Topology(name, f"{short}-a", f"{short}-c", str(hosts[1]), str(hosts[0]),
                    str(hosts[2]), net.prefixlen, mtu, offloads)


RESERVED_SUBNETS = frozenset({77, 78, 79, 200})
"""10.N.0.0/24 networks that other tools and suites use with fixed addresses."""


def _used_networks() -> list[tuple[ipaddress.IPv4Network, str]]:
    """Every IPv4 network an address or route of this namespace covers, with its device."""
    used: list[tuple[ipaddress.IPv4Network, str]] = []
    for what in (("-4", "-j", "addr"), ("-4", "-j", "route")):
        try:
            rows = json.loads(_run("ip", *what, check=False).stdout or "[]")
        except ValueError:
            rows = []
        for row in rows:
            dev = str(row.get("ifname") or row.get("dev") or "?")
            for a in row.get("addr_info", []):
                used.append((ipaddress.ip_network(f"{a['local']}/{a['prefixlen']}",
                                                  strict=False), dev))
            dst = row.get("dst")
            if dst and dst != "default":
                used.append((ipaddress.ip_network(dst, strict=False), dev))
    return used


def free_subnet(first: int = 92, last: int = 199) -> str:
    """A 10.N.0.0/24 that no interface or route of this namespace uses yet.

    Two test runs that make topologies with the same subnet in the root namespace
    reach each other's servers (the first route wins); suites pick with this."""
    used = [net for net, _ in _used_networks()]
    for n in range(first, last + 1):
        net = ipaddress.ip_network(f"10.{n}.0.0/24")
        if n not in RESERVED_SUBNETS and not any(_shadows(u, net) for u in used):
            return str(net)
    raise SetupError(f"no free 10.N.0.0/24 for N in {first}-{last}")


def _shadows(used: ipaddress.IPv4Network, net: ipaddress.IPv4Network) -> bool:
    """Whether an existing route or address `used` would take packets meant for a new
    pair on `net`: it overlaps and is at least as specific. A wider one (a VPN's
    10.0.0.0/8) loses to the new, more specific route and is no obstacle."""
    return used.overlaps(net) and used.prefixlen >= net.prefixlen


def check_subnet_free(subnet: str) -> None:
    """SetupError if an interface or route of this namespace already covers `subnet`:
    the clients' packets would follow the first route, to the other interface."""
    net = ipaddress.ip_network(subnet, strict=False)
    for u, dev in _used_networks():
        if _shadows(u, net):
            try:
                other = f"for example {free_subnet()}"
            except SetupError:
                other = "none of 10.92-199.0.0/24 is free either"
            raise SetupError(f"--subnet {subnet} overlaps {u} on {dev}: clients would reach "
                             f"{dev} instead; choose another --subnet ({other}) or remove "
                             f"{dev}'s namespace (pyctl netns down --name NAME)")


def pids(name: str) -> list[int]:
    """The processes running in namespace `name`."""
    r = _run("ip", "netns", "pids", name, check=False)
    return [int(x) for x in r.stdout.split() if x.isdigit()]


def offloads_off(iface: str, netns: str | None = None) -> None:
    pre = ["ip", "netns", "exec", netns] if netns else []
    _run(*pre, "ethtool", "-K", iface, "tx", "off", "tso", "off", "gso", "off", "gro", "off")


def check_mtu(mtu: int) -> int:
    lo, hi = mtu_range()
    if not lo <= mtu <= hi:
        raise SetupError(f"--mtu {mtu}: choose {lo}-{hi} (1500 is classic Ethernet, "
                         "9000 jumbo frames)")
    return mtu


def up(name: str = "inreplay", subnet: str = "10.77.0.0/24", mtu: int = DEFAULT_MTU,
       offloads: bool = False, impair: str | None = None, impair_seed: int = 1,
       fresh: bool = False) -> Topology:
    """Create the namespace and veth pair (idempotent for the same name).

    fresh: a namespace of that name with nothing running in it is left over from a
    run that was killed: remove it and make a new one; one with processes running in
    it is another run's, a SetupError. A new pair's subnet must be free (a left-over
    pair on it would take the clients' packets).

    mtu: both veth ends' MTU. offloads: keep the kernel's default offloads
    (kernel-stack servers only; af_packet needs them off). impair: a spec
    (module docstring) puts the impairment bridge between the two ends, in
    namespace NAME-br, its decisions drawn from impair_seed."""
    require_root("pyctl netns up")
    t = topology(name, subnet, check_mtu(mtu), offloads)
    if impair is not None:
        if offloads:
            raise SetupError("--impair needs offloads off (the bridge forwards real frames)")
        spec = impair_spec(impair)
        check_values(spec)
    if name in namespaces():
        if not fresh:
            t.impair = _bridge_state(name)
            return t
        busy = pids(name)
        if busy:
            raise SetupError(f"namespace {name} is in use by pid {', '.join(map(str, busy))} "
                             "(another run): stop that run, or remove the namespace with "
                             f"pyctl netns down --name {name}")
        down(name)
    check_subnet_free(subnet)
    _run("ip", "netns", "add", name)
    try:
        if impair is None:
            _run("ip", "link", "add", t.peer, "type", "veth", "peer", "name", t.iface)
            _run("ip", "link", "set", t.iface, "netns", name)
        else:
            bns, bc, ba = bridge_names(name)
            _run("ip", "netns", "add", bns)
            _run("ip", "link", "add", t.peer, "type", "veth", "peer", "name", bc)
            _run("ip", "link", "add", ba, "type", "veth", "peer", "name", t.iface)
            _run("ip", "link", "set", bc, "netns", bns)
            _run("ip", "link", "set", ba, "netns", bns)
            _run("ip", "link", "set", t.iface, "netns", name)
            for iface in (bc, ba):
                _link_setup(iface, bns, mtu, offloads)
                _run("ip", "netns", "exec", bns, "ip", "link", "set", iface, "up")
            _run("ip", "netns", "exec", bns, "ip", "link", "set", "lo", "up")
        for iface, ns in ((t.peer, None), (t.iface, name)):
            _link_setup(iface, ns, mtu, offloads)
        _run("ip", "addr", "add", f"{t.client_ip}/{t.prefix}", "dev", t.peer)
        _run("ip", "link", "set", t.peer, "up")
        ns_ip = ["ip", "netns", "exec", name, "ip"]
        _run(*ns_ip, "link", "set", "lo", "up")
        _run(*ns_ip, "addr", "add", f"{t.kernel_ip}/{t.prefix}", "dev", t.iface)
        _run(*ns_ip, "link", "set", t.iface, "up")
        if impair is not None:
            t.impair = _start_bridge(name, spec, impair_seed)
    except SetupError:
        down(name)
        raise
    return t


def _link_setup(iface: str, ns: str | None, mtu: int, offloads: bool) -> None:
    pre = ["ip", "netns", "exec", ns] if ns else []
    _run(*pre, "sysctl", "-qw", f"net.ipv6.conf.{iface}.disable_ipv6=1", check=False)
    _run(*pre, "ip", "link", "set", iface, "mtu", str(mtu))
    if not offloads:
        offloads_off(iface, ns)


def down(name: str = "inreplay") -> bool:
    """Remove the namespace and its veth pair; False if there was nothing to remove."""
    return down_with_stats(name)[0]


def down_with_stats(name: str = "inreplay") -> tuple[bool, dict[str, object] | None]:
    """down(), and the impairment bridge's final counters if there was one."""
    require_root("pyctl netns down")
    t = topology(name, "10.77.0.0/24")
    have = namespaces()
    existed = name in have
    stats = None
    bns = bridge_names(name)[0]
    if bns in have:
        stats = _stop_bridge(name)
        _run("ip", "netns", "del", bns)
    if existed:
        _run("ip", "netns", "del", name)
    _run("ip", "link", "del", t.peer, check=False)  # gone with the namespace, normally
    return existed, stats


# ---- the impairment bridge ----------------------------------------------------

_SPEC_KEYS = ("loss", "delay", "reorder", "duplicate", "burst", "drop")
_ITEM = re.compile(r"^(?:(in|out|ab|ba)\.)?([a-z]+)=(\S+)$")


def impair_spec(spec: str) -> str:
    """Check a --impair spec and translate it to the bridge's own (in. → ab., out. → ba.)."""
    items = []
    for raw in spec.replace(" ", "").split(","):
        if not raw:
            continue
        m = _ITEM.match(raw)
        if not m or m.group(2) not in _SPEC_KEYS:
            raise SetupError(f"--impair {spec}: bad item {raw!r}; items are [in.|out.]KEY=VALUE "
                             f"with KEY one of {', '.join(_SPEC_KEYS)} (e.g. loss=5%,"
                             "delay=20ms±5ms,reorder=25%,duplicate=1%,burst=30%/2s)")
        way = {"in": "ab.", "out": "ba.", "ab": "ab.", "ba": "ba."}.get(m.group(1) or "", "")
        items.append(f"{way}{m.group(2)}={m.group(3)}")
    return ",".join(items)


def check_values(spec: str) -> None:
    """Have the bridge binary parse a translated spec (it alone knows the value grammar):
    SetupError with its reason, before anything is changed."""
    r = subprocess.run([impair_binary(), "--check", spec], capture_output=True, text=True,
                       check=False)
    if r.returncode != 0:
        reason = r.stderr.strip().removeprefix("impair: ") or f"exit code {r.returncode}"
        raise SetupError(f"--impair {spec}: {reason}; the bridge keeps its current spec")


def bridge_names(name: str) -> tuple[str, str, str]:
    """The bridge's namespace and its two interfaces (client side, appliance side)."""
    short = name[:12]
    return f"{name}-br", f"{short}-bc", f"{short}-ba"


def impair_binary() -> str:
    env = os.environ.get("INREPLAY_IMPAIR")
    here = Path(__file__).resolve().parent.parent / "build" / "bench" / "impair"
    for cand in (env, str(here), shutil.which("impair")):
        if cand and os.access(cand, os.X_OK):
            return cand
    raise SetupError(f"the impairment bridge is not built: run 'make build' ({here})")


def _bridge_dir() -> Path:
    from pyctl.server import rundir

    d = rundir() / "netns"
    d.mkdir(exist_ok=True, mode=0o700)
    return d


def _bridge_files(name: str) -> dict[str, Path]:
    d, bns = _bridge_dir(), bridge_names(name)[0]
    return {k: d / f"{bns}.{k}" for k in ("pid", "spec", "stats", "log", "state")}


def _start_bridge(name: str, spec: str, seed: int) -> dict[str, object]:
    bns, bc, ba = bridge_names(name)
    f = _bridge_files(name)
    files.write_private(f["spec"], spec + "\n")
    for k in ("pid", "stats"):
        f[k].unlink(missing_ok=True)
    with os.fdopen(files.open_log(f["log"], truncate=True), "w") as log:
        r = subprocess.run(["ip", "netns", "exec", bns, impair_binary(), "--a", bc, "--b", ba,
                            "--seed", str(seed), "--spec-file", str(f["spec"]),
                            "--stats", str(f["stats"]), "--pidfile", str(f["pid"]), "--daemon"],
                           stdin=subprocess.DEVNULL, stdout=log, stderr=log, check=False)
    if r.returncode != 0:
        raise SetupError(f"the impairment bridge did not start: {f['log'].read_text().strip()}")
    pid = int(f["pid"].read_text())
    deadline = time.monotonic() + 5
    while not f["stats"].exists():  # written once the sockets are bound
        if time.monotonic() > deadline:
            raise SetupError(f"the impairment bridge (pid {pid}) did not come up: "
                             f"{f['log'].read_text().strip()}")
        time.sleep(0.01)
    state: dict[str, object] = {"pid": pid, "netns": bns, "a": bc, "b": ba, "spec": spec,
                                "seed": seed, "stats": str(f["stats"]), "log": str(f["log"])}
    files.write_private(f["state"], json.dumps(state))
    return state


def _bridge_state(name: str) -> dict[str, object] | None:
    try:
        return dict(json.loads(_bridge_files(name)["state"].read_text()))
    except (OSError, ValueError):
        return None


def _bridge_pids(name: str) -> list[int]:
    r = _run("ip", "netns", "pids", bridge_names(name)[0], check=False)
    return [int(p) for p in r.stdout.split() if p.isdigit()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"


def _read_stats(path: Path) -> dict[str, object] | None:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def _stop_bridge(name: str) -> dict[str, object] | None:
    """SIGTERM the bridge (it writes its counters) and return the counters."""
    f = _bridge_files(name)
    pids = _bridge_pids(name)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    stats = _read_stats(f["stats"])
    for k in ("pid", "spec", "state"):
        f[k].unlink(missing_ok=True)
    return stats


def _bridge_pid(name: str) -> int:
    pids = _bridge_pids(name)
    if not pids:
        raise SetupError(f"namespace {name}: no impairment bridge runs "
                         f"(pyctl netns up --name {name} --impair SPEC)")
    return pids[0]


def bridge_stats(name: str = "inreplay") -> dict[str, object]:
    """The running bridge's counters (it writes them on SIGUSR2)."""
    f = _bridge_files(name)["stats"]
    before = f.stat().st_mtime_ns if f.exists() else 0
    os.kill(_bridge_pid(name), signal.SIGUSR2)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        if f.exists() and f.stat().st_mtime_ns != before:
            got = _read_stats(f)
            if got is not None:
                return got
        time.sleep(0.005)
    raise SetupError(f"the impairment bridge of {name} did not write {f}")


def set_impair(name: str, spec: str) -> None:
    """Change the running bridge's impairments (the counters go on)."""
    f = _bridge_files(name)
    check_values(impair_spec(spec))
    files.write_private(f["spec"], impair_spec(spec) + "\n")
    os.kill(_bridge_pid(name), signal.SIGHUP)
    state = _bridge_state(name)
    if state is not None:
        state["spec"] = impair_spec(spec)
        files.write_private(f["state"], json.dumps(state))


def burst(name: str = "inreplay") -> None:
    """Start a loss burst (the spec's burst=P%/Ts, default 30% for 2 s)."""
    os.kill(_bridge_pid(name), signal.SIGUSR1)


# ---- hugepages --------------------------------------------------------------

HUGEPAGES_2M = Path("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")
HUGE_DIR = Path("/dev/hugepages")


def hugepages_free() -> int:
    try:
        return int(Path("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages").read_text())
    except (OSError, ValueError):
        return 0


def ensure_hugepages(pages: int) -> None:
    """Reserve at least `pages` free 2 MB hugepages and mount hugetlbfs if needed."""
    if hugepages_free() < pages:
        require_root(f"--hugepages {pages} (reserving hugepages)")
        have = int(HUGEPAGES_2M.read_text())
        HUGEPAGES_2M.write_text(str(have + pages - hugepages_free()))
        if hugepages_free() < pages:
            raise SetupError(f"--hugepages {pages}: the kernel reserved only {hugepages_free()} "
                             "free 2 MB pages; free memory or ask for fewer")
    mounts = Path("/proc/mounts").read_text()
    if not any(line.split()[2] == "hugetlbfs" for line in mounts.splitlines()):
        require_root("mounting hugetlbfs")
        HUGE_DIR.mkdir(exist_ok=True)
        _run("mount", "-t", "hugetlbfs", "nodev", str(HUGE_DIR))
