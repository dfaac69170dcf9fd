"""inreplay control plane: start, configure and query the replay appliance."""

import re
from pathlib import Path


def _version() -> str:
    """meson.build's project version, the one place it is written: read from meson.build
    in a checkout, from the installed package's metadata (which meson-python took from
    it) otherwise."""
    src = Path(__file__).resolve().parent.parent / "meson.build"
    if src.is_file():
        m = re.search(r"^project\('inreplay'.*?version\s*:\s*'([^']+)'", src.read_text(),
                      re.S | re.M)
        if m:
            return m.group(1)
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("inreplay")
    except PackageNotFoundError:
        return "unknown"


__version__ = _version()
