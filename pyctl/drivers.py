"""`pyctl drivers`: the DPDK poll-mode drivers available to the daemon.

Like DPDK's dpdk-pmdinfo, this reads the ``PMD_INFO_STRING= {json}`` records
that every PMD library embeds in its read-only data, here with pyelftools.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

MARKER = b"PMD_INFO_STRING= "
_RECORD = re.compile(re.escape(MARKER) + rb"(\{[^\x00]*\})\x00")


@dataclass
class Driver:
    """One poll-mode driver."""

    name: str
    library: str
    params: str = ""
    kmod: str = ""
    pci_ids: list[list[int]] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """'net', 'crypto', ... from the library name (librte_net_af_packet -> net)."""
        m = re.match(r"librte_([a-z]+)_", Path(self.library).name)
        return m.group(1) if m else "?"


def pmd_dirs() -> list[Path]:
    """Where this DPDK keeps its PMD libraries (pkg-config, then Debian's path)."""
    dirs: list[Path] = []
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "libdpdk"],
                                capture_output=True, text=True, check=True).stdout.strip()
        if libdir:
            dirs += sorted(Path(libdir, "dpdk").glob("pmds-*"))
    except (OSError, subprocess.CalledProcessError):
        pass
    dirs += sorted(Path("/usr/lib/x86_64-linux-gnu/dpdk").glob("pmds-*"))
    seen: list[Path] = []
    for d in dirs:
        if d.is_dir() and d.resolve() not in [s.resolve() for s in seen]:
            seen.append(d)
    return seen


def read_library(path: Path) -> list[Driver]:
    """The PMD records in one shared library (none if it is not an ELF file)."""
    out = []
    try:
        with path.open("rb") as f:
            elf = ELFFile(f)
            for section in ("rodata", ".rodata"):
                sec = elf.get_section_by_name(section)
                if sec is not None:
                    break
            else:
                return []
            data = sec.data()
    except (OSError, ELFError):
        return []
    for m in _RECORD.finditer(data):
        try:
            info = json.loads(m.group(1))
        except ValueError:
            continue
        out.append(Driver(info.get("name", "?"), str(path), info.get("params", ""),
                          info.get("kmod", ""), info.get("pci_ids", [])))
    return out


def list_drivers(dirs: list[Path] | None = None) -> list[Driver]:
    """Every PMD found, sorted by kind and name."""
    drivers: list[Driver] = []
    for d in dirs if dirs is not None else pmd_dirs():
        for lib in sorted(d.glob("librte_*.so*")):
            if lib.is_symlink():
                continue
            drivers += read_library(lib)
    return sorted(drivers, key=lambda x: (x.kind, x.name))
