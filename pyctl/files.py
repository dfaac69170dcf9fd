"""The control plane's own files, private by default.

pyctl keeps its state in a run directory that other users may share a parent of
(``/tmp``): the directory must be this user's own, and every file pyctl writes in
it (or elsewhere: a ``--logfile``) is created with ``O_CREAT | O_EXCL | O_NOFOLLOW``
and mode 0600, so that nothing another user planted is written through and no
one else can read what was written. A file replaced as a whole (a state file)
is written to a private temporary file that is then renamed over it
(``os.replace``, which replaces a symlink rather than following it).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

RUN_DIR_ENV = "INREPLAY_RUN_DIR"
"""The environment variable that chooses the run directory (default /tmp/inreplay-<uid>)."""

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePathError(ValueError):
    """A file or directory pyctl will not use: the message is one line that says why and
    what to do."""


def private_dir(path: Path, what: str = "run directory") -> Path:
    """``path`` as a directory only this user may write: created with mode 0700 if it does
    not exist; refused (UnsafePathError) if it is a symlink, not a directory, owned by
    another user, or writable by the group or by everyone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
        os.chmod(path, 0o700)  # exactly 0700, whatever the umask took away
    except FileExistsError:
        pass
    st = os.lstat(path)
    fix = (f"remove it or set {RUN_DIR_ENV} to a directory of your own"
           if what == "run directory" else "remove it")
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(f"{what} {path} is a symlink, which pyctl does not follow: {fix}")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(f"{what} {path} is not a directory: {fix}")
    if st.st_uid != os.geteuid():
        raise UnsafePathError(f"{what} {path} belongs to uid {st.st_uid}, not to you "
                              f"(uid {os.geteuid()}): {fix}")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafePathError(f"{what} {path} is writable by others (mode "
                              f"{stat.S_IMODE(st.st_mode):04o}): 'chmod 700 {path}', or {fix}")
    return path


def create_private(path: Path) -> int:
    """A new file at ``path``, mode 0600, opened for writing (O_CREAT | O_EXCL | O_NOFOLLOW):
    fails with FileExistsError if anything, a symlink included, is already there."""
    return os.open(path, _CREATE, 0o600)


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically: written to a new private temporary file
    beside it (see create_private), then renamed over it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    fd = create_private(tmp)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def open_log(path: str | Path, truncate: bool = False) -> int:
    """A log file opened for appending (``truncate``: emptied first): created private (see
    create_private) when it does not exist; an existing one must be a regular file of this
    user's, never reached through a symlink. Raises OSError, or UnsafePathError saying
    why a file there is refused."""
    try:
        return os.open(path, _CREATE | os.O_APPEND, 0o600)
    except FileExistsError:
        pass
    flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | (0 if truncate else os.O_APPEND)
    try:
        fd = os.open(path, flags | os.O_NONBLOCK)  # a FIFO planted there must not block us
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafePathError(f"{path} is a symlink, which pyctl does not write through: "
                                  f"remove it or name another file") from None
        raise
    st = os.fstat(fd)
    why = ("is not a regular file" if not stat.S_ISREG(st.st_mode) else
           f"belongs to uid {st.st_uid}, not to you" if st.st_uid != os.geteuid() else "")
    if why:
        os.close(fd)
        raise UnsafePathError(f"{path} {why}: remove it or name another file")
    os.set_blocking(fd, True)
    if truncate:
        os.ftruncate(fd, 0)  # only once it is known to be ours
    return fd


def read_secret(path: str | Path) -> str:
    """The first line of a file holding a password (its line end dropped)."""
    with open(path, encoding="utf-8") as f:
        return f.readline().rstrip("\r\n")
