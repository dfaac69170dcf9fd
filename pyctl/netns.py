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
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path


class SetupError(RuntimeError):
    """A host set-up step failed; the message says what to do."""


DEFAULT_MTU = 9000
"""The test topology's veth MTU (jumbo frames)."""
MIN_MTU, MAX_MTU = 576, 9600


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


def offloads_off(iface: str, netns: str | None = None) -> None:
    pre = ["ip", "netns", "exec", netns] if netns else []
    _run(*pre, "ethtool", "-K", iface, "tx", "off", "tso", "off", "gso", "off", "gro", "off")


def check_mtu(mtu: int) -> int:
    if not MIN_MTU <= mtu <= MAX_MTU:
        raise SetupError(f"--mtu {mtu}: choose {MIN_MTU}-{MAX_MTU} (1500 is classic Ethernet, "
                         "9000 jumbo frames)")
    return mtu


def up(name: str = "inreplay", subnet: str = "10.77.0.0/24", mtu: int = DEFAULT_MTU,
       offloads: bool = False) -> Topology:
    """Create the namespace and veth pair (idempotent for the same name).

    mtu: both veth ends' MTU. offloads: keep the kernel's default offloads
    (kernel-stack servers only; af_packet needs them off)."""
    require_root("pyctl netns up")
    t = topology(name, subnet, check_mtu(mtu), offloads)
    if name in namespaces():
        return t
    _run("ip", "netns", "add", name)
    try:
        _run("ip", "link", "add", t.peer, "type", "veth", "peer", "name", t.iface)
        _run("ip", "link", "set", t.iface, "netns", name)
        for iface, ns in ((t.peer, None), (t.iface, name)):
            pre = ["ip", "netns", "exec", ns] if ns else []
            _run(*pre, "sysctl", "-qw", f"net.ipv6.conf.{iface}.disable_ipv6=1", check=False)
            _run(*pre, "ip", "link", "set", iface, "mtu", str(mtu))
            if not offloads:
                offloads_off(iface, ns)
        _run("ip", "addr", "add", f"{t.client_ip}/{t.prefix}", "dev", t.peer)
        _run("ip", "link", "set", t.peer, "up")
        ns_ip = ["ip", "netns", "exec", name, "ip"]
        _run(*ns_ip, "link", "set", "lo", "up")
        _run(*ns_ip, "addr", "add", f"{t.kernel_ip}/{t.prefix}", "dev", t.iface)
        _run(*ns_ip, "link", "set", t.iface, "up")
    except SetupError:
        down(name)
        raise
    return t


def down(name: str = "inreplay") -> bool:
    """Remove the namespace and its veth pair; False if there was nothing to remove."""
    require_root("pyctl netns down")
    t = topology(name, "10.77.0.0/24")
    existed = name in namespaces()
    if existed:
        _run("ip", "netns", "del", name)
    _run("ip", "link", "del", t.peer, check=False)  # gone with the namespace, normally
    return existed


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
