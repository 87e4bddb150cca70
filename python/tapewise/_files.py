"""tapewise._files — the one way the Python package writes a file and the one rule it uses to read a
folder it did not write: writes never go through an existing symbolic link and never leave a
truncated file (a temporary file in the same folder, then os.replace), and paths read from a
folder are plain names that resolve inside it."""

from __future__ import annotations

import os
import stat
import tempfile
from typing import BinaryIO, Callable


def is_plain_file_name(name: object) -> bool:
    """A single printable-ASCII file name that stays in its folder: not empty, not "." or "..", no
    "/" or "\\" (the same rule as the C++ runner's is_plain_file_name, plus what it escapes)."""
    return (isinstance(name, str) and name not in ("", ".", "..") and
            all(0x20 <= ord(c) < 0x7F and c not in "/\\" for c in name))


def lies_within(folder: str, path: str) -> bool:
    """Whether `path` (already resolved) is `folder` (resolved) or lies below it."""
    return os.path.commonpath([folder, path]) == folder


def resolve_within(folder: str, name: str) -> str:
    """`folder`/`name` with symbolic links resolved; ValueError when it leads outside `folder`
    (which must be resolved already)."""
    path = os.path.realpath(os.path.join(folder, name))
    if not lies_within(folder, path):
        raise ValueError(f"{os.path.join(folder, name)} leads outside {folder}")
    return path


def write_file(path: str, write: Callable[[BinaryIO], None]) -> None:
    """Writes `path` through `write(file)`: into a temporary file of the same folder, flushed to
    disk, then renamed over `path`, so an interrupt leaves either the old file or the new one. An
    existing symbolic link or non-regular file at `path` is refused (ValueError), never followed."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISLNK(mode):
        raise ValueError(f"{path} is a symbolic link; refusing to write through it")
    if mode is not None and not stat.S_ISREG(mode):
        raise ValueError(f"{path} is not a regular file; refusing to write to it")
    folder, name = os.path.split(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o644)  # mkstemp's 0600 would hide the answer from other users
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)  # replaces a link made since the check, never writes through it
    except BaseException:
        os.unlink(temporary)
        raise
