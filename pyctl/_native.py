"""cffi binding to libinreplay, declared from the real header.

The declarations are read from the real header (the block between the CFFI
markers) and the library is opened in ABI mode: both from this package's directory
when it is installed (``pip install .`` puts them there), else from a source
checkout (``fstack_redis/inreplay.h``, ``build/libinreplay.so``). C error codes become
Python exceptions in :func:`check`.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

from cffi import FFI

PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parent
# First the library installed inside this package (pip install . / a wheel), then a
# source checkout's build/ (make build; the tests).
HEADER_CANDIDATES = (
    PACKAGE / "inreplay.h",
    ROOT / "fstack_redis" / "inreplay.h",
)
LIB_CANDIDATES = (
    PACKAGE / "libinreplay.so",
    ROOT / "build" / "libinreplay.so",
)


# REPLAY.* as a module for stock redis-server (fstack_redis/module/): a source
# checkout's build/ (make build; meson leaves it out without Redis's source).
MODULE_CANDIDATES = (
    PACKAGE / "inreplay_module.so",
    ROOT / "build" / "fstack_redis" / "module" / "inreplay_module.so",
)


class InreplayError(Exception):
    """An error reported by libinreplay: its code (IR_E*), message, and the system error
    number behind it (errno, 0 if none: ir_last_errno) for callers to test."""

    def __init__(self, code: int, message: str, errno: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.errno = errno


class ConfigError(InreplayError):
    """A configuration value the library rejected."""


class NetworkError(InreplayError):
    """The server could not bind or listen."""


class EmptyTableError(InreplayError):
    """Sampling a table with no items."""


class NativeLibraryMissingError(RuntimeError):
    """libinreplay.so or its header could not be found."""


def _declarations(header: Path) -> str:
    text = header.read_text()
    m = re.search(r"/\* CFFI-BEGIN \*/(.*)/\* CFFI-END \*/", text, re.S)
    if not m:
        raise NativeLibraryMissingError(f"{header}: no CFFI-BEGIN/CFFI-END block")
    # cffi's cdef understands '#define NAME <int>' but not comments after it.
    return re.sub(r"(#define\s+\w+\s+-?\d+)\s*/\*.*?\*/", r"\1", m.group(1))


def _find(candidates: tuple[Path, ...], env: str, what: str) -> Path:
    override = os.environ.get(env)
    if override:
        p = Path(override)
        if not p.exists():
            raise NativeLibraryMissingError(f"{env}={override}: no such file")
        return p
    for p in candidates:
        if p.exists():
            return p
    raise NativeLibraryMissingError(
        f"{what} not found (looked in {', '.join(str(c) for c in candidates)}): "
        f"run 'make build' or set {env}"
    )


def library_path() -> Path:
    """The libinreplay.so this process loads (or would load)."""
    return _find(LIB_CANDIDATES, "INREPLAY_LIB", "libinreplay.so")


def module_path() -> Path:
    """The REPLAY.* module for redis-server --loadmodule (INREPLAY_MODULE overrides)."""
    return _find(MODULE_CANDIDATES, "INREPLAY_MODULE", "inreplay_module.so").resolve()


@lru_cache(maxsize=1)
def load() -> tuple[FFI, object]:
    """Return (ffi, lib), loading the library on first use."""
    ffi = FFI()
    ffi.cdef(_declarations(_find(HEADER_CANDIDATES, "INREPLAY_HEADER", "inreplay.h")))
    lib = ffi.dlopen(str(library_path()))
    return ffi, lib


def stacks() -> tuple[str, ...]:
    """The network stacks compiled into the library: ("kernel",) or ("kernel", "dpdk")."""
    ffi, lib = load()
    return tuple(ffi.string(lib.ir_stacks()).decode().split())


def has_stack(stack: str) -> bool:
    """The library has this stack compiled in (False when there is no library)."""
    try:
        return stack in stacks()
    except NativeLibraryMissingError:
        return False


def missing_stack_hint(stack: str) -> str:
    """One line for a stack this library was built without: why, and how to get it."""
    if stack != "dpdk":
        return f"there is no '{stack}' stack: use --stack kernel or --stack dpdk"
    lib = library_path()
    if lib.parent == PACKAGE:
        how = ("install libdpdk-dev and liblwip-dev (apt-get install libdpdk-dev liblwip-dev), "
               "then rebuild the package: pip install --force-reinstall --no-cache-dir "
               "<this source tree or its sdist>")
    else:
        how = (f"install libdpdk-dev and liblwip-dev (make deps does), then "
               f"'meson setup --reconfigure {lib.parent}' and 'make build'")
    return (f"this install has no DPDK stack ({lib} was built without DPDK and lwIP; it has: "
            f"{', '.join(stacks())}): {how}; or use --stack kernel")


_EXC = {-4: ConfigError, -5: NetworkError, -3: EmptyTableError}


def last_error() -> str:
    """ir_last_error() of the calling thread."""
    ffi, lib = load()
    return ffi.string(lib.ir_last_error()).decode(errors="replace")


def last_errno() -> int:
    """ir_last_errno() of the calling thread."""
    _, lib = load()
    return int(lib.ir_last_errno())


def check(code: int, detail: str | None = None, errno: int | None = None) -> int:
    """Raise the matching exception for a negative libinreplay return code.

    ``detail`` and ``errno`` are ir_last_error() and ir_last_errno() when the call ran
    on another thread.
    """
    if code >= 0:
        return code
    ffi, lib = load()
    if detail is None:
        detail = last_error()
        errno = last_errno()
    reason = ffi.string(lib.ir_strerror(code)).decode(errors="replace")
    if code == -1:
        raise ValueError(detail or reason)
    raise _EXC.get(code, InreplayError)(code, detail or reason, errno or 0)
