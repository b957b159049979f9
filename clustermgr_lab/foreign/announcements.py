"""Reading the discovery folder's announcement files as untrusted input: bounded, owned by this user, validated.

Kernels of this server drop one small JSON file per scheduler into the folder (see
:mod:`clustermgr_lab.preloads.discovery`). Anything else that can write there is treated as
hostile: a file is read only when it is a regular file (not a FIFO, not a symlink) owned by this
user and at most :data:`MAX_FILE_BYTES` long; at most :data:`MAX_ANNOUNCEMENTS` are read; its pid
must be a live process started under this server; its address must be one a kernel on this host
can announce (loopback, or an address of one of this host's interfaces); its notebook name must be
printable. A file that fails any check is skipped with one log line, and the others still count.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from clustermgr_lab.common.addresses import parse_address, parse_host_port
from clustermgr_lab.domain.fields import is_number

MAX_FILE_BYTES = 4096
MAX_ANNOUNCEMENTS = 64
MAX_PID = 2**22  # Linux's largest pid_max
MAX_NOTEBOOK_CHARS = 255


class BadAnnouncement(ValueError):
    """One announcement file is not acceptable; the message says why (no untrusted text unquoted)."""


@dataclass(frozen=True)
class Announcement:
    """A checked announcement: a scheduler started in one of this server's kernels."""

    address: str
    pid: int
    notebook: str | None


def local_addresses() -> set[ipaddress._BaseAddress]:
    """The addresses of this host's interfaces (loopback included)."""
    found = set()
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            try:
                found.add(ipaddress.ip_address(address.address.split("%", 1)[0]))
            except ValueError:
                continue  # a MAC address
    return found


def check_address(value: Any, allowed: set) -> str:
    """``tcp://ip:port`` with an address of this host, or :class:`BadAnnouncement`."""
    if not isinstance(value, str) or len(value) > 100:
        raise BadAnnouncement("its address is not a string of at most 100 characters")
    try:
        scheme, location = parse_address(value)
        host, port = parse_host_port(location)
    except ValueError:
        raise BadAnnouncement(f"its address {value!r} is not tcp://host:port") from None
    if scheme != "tcp" or not isinstance(port, int) or not 1 <= port <= 65535:
        raise BadAnnouncement(f"its address {value!r} is not tcp://host:port with a port from 1 to 65535")
    if host == "localhost":
        return f"tcp://127.0.0.1:{port}"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise BadAnnouncement(f"its address {value!r} does not name an IP address") from None
    if not ip.is_loopback and ip not in allowed:
        raise BadAnnouncement(f"its address {value!r} is not loopback or an address of this host")
    return f"tcp://{host}:{port}" if ip.version == 4 else f"tcp://[{host}]:{port}"


def check_pid(value: Any, server_pid: int) -> int:
    """A live pid of a process started under ``server_pid`` (a kernel of this server), or :class:`BadAnnouncement`."""
    if not is_number(value, integer=True) or not 1 < value <= MAX_PID:
        raise BadAnnouncement(f"its pid {str(value)[:30]!r} is not a process id")
    try:
        parents = psutil.Process(value).parents()
    except psutil.Error:
        raise BadAnnouncement(f"its process {value} is gone") from None
    if server_pid not in {p.pid for p in parents}:
        raise BadAnnouncement(f"process {value} was not started under this server")
    return value


def check_notebook(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_NOTEBOOK_CHARS or not value.isprintable():
        raise BadAnnouncement("its notebook name is not printable text of at most 255 characters")
    return value


def read_file(path: Path, uid: int) -> dict:
    """The JSON object in ``path`` if it is a small regular file owned by ``uid``; never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadAnnouncement("it is a symbolic link") from None
        raise BadAnnouncement(f"it cannot be opened ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BadAnnouncement("it is not a regular file")
        if info.st_uid != uid:
            raise BadAnnouncement(f"it is owned by uid {info.st_uid}, not by this user")
        if info.st_size > MAX_FILE_BYTES:
            raise BadAnnouncement(f"it has {info.st_size} bytes, more than {MAX_FILE_BYTES}")
        data = os.read(fd, MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
    try:
        parsed = json.loads(data)
    except ValueError:
        raise BadAnnouncement("it is not JSON") from None
    if not isinstance(parsed, dict):
        raise BadAnnouncement("it is not a JSON object")
    return parsed


def parse_announcement(data: dict, server_pid: int, allowed: set) -> Announcement:
    return Announcement(
        address=check_address(data.get("address"), allowed),
        pid=check_pid(data.get("pid"), server_pid),
        notebook=check_notebook(data.get("notebook")),
    )


def check_folder(folder: Path) -> None:
    """Refuse a discovery folder that is not this user's alone (another user could announce into it)."""
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise PermissionError(f"{folder} is not a folder")
    if info.st_uid != os.getuid():
        raise PermissionError(f"{folder} belongs to uid {info.st_uid}, not to this user")
    if info.st_mode & 0o022:
        raise PermissionError(f"{folder} can be written by others (mode {stat.S_IMODE(info.st_mode):o})")
