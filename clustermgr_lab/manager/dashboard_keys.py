"""Per-cluster dashboard keys: the capability in a sandboxed dashboard's URL, derived from a secret of this server."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import secrets
import stat
from pathlib import Path

#: Bytes of the server secret, and of a key (an HMAC-SHA256 truncated to 128 bits).
SECRET_BYTES = 32
KEY_BYTES = 16
#: What a key looks like in a URL: the path segment ``key-<base64url>`` right after the cluster id.
KEY_SEGMENT_PREFIX = "key-"


MAX_KEPT_SEGMENTS = 4096  # segments kept at most (a few hundred bytes each)


class DashboardKeys:
    """Derives and checks the key of each cluster's dashboard URL.

    A key is ``HMAC-SHA256(secret, cluster id)``, so it needs no storage of its own and stays the same
    across server restarts as long as the secret file does (restored dashboard tabs keep working).
    The secret is 32 random bytes in a file of mode 0600, created once; if that file cannot be
    created or is not trustworthy (owned by someone else, readable by others, wrong size), a secret
    held in memory is used instead, with a log line: keys then change when the server restarts.

    Parameters
    ----------
    secret_path
        The secret's file, e.g. next to the cluster store.
    log
        Where to say why the file is not used.
    """

    def __init__(self, secret_path: Path, log: logging.Logger | None = None):
        self.secret_path = Path(secret_path)
        self.log = log or logging.getLogger(__name__)
        self._secret = self._load_or_create()
        self._segments: dict[str, str] = {}  # cluster id -> segment: asked for at every description of a cluster

    def key(self, cluster_id: str) -> str:
        """The key of ``cluster_id``'s dashboard (22 URL-safe characters)."""
        digest = hmac.new(self._secret, cluster_id.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest[:KEY_BYTES]).rstrip(b"=").decode("ascii")

    def segment(self, cluster_id: str) -> str:
        """The path segment carrying the key: ``key-<key>`` (kept: an HMAC, and the same for ever for a cluster)."""
        segment = self._segments.get(cluster_id)
        if segment is None:
            if len(self._segments) >= MAX_KEPT_SEGMENTS:
                self._segments.clear()
            segment = self._segments[cluster_id] = KEY_SEGMENT_PREFIX + self.key(cluster_id)
        return segment

    def is_valid(self, cluster_id: str, key: str) -> bool:
        """Whether ``key`` is ``cluster_id``'s key (compared in constant time)."""
        return hmac.compare_digest(self.key(cluster_id).encode("ascii"), key.encode("utf-8", "surrogatepass"))

    def _load_or_create(self) -> bytes:
        try:
            return self._read() if self.secret_path.exists() else self._create()
        except (OSError, ValueError) as exc:
            self.log.warning(
                "dashboard keys: not using %s (%s); keys held in memory change when the server restarts",
                self.secret_path, exc,
            )  # fmt: skip
            return secrets.token_bytes(SECRET_BYTES)

    def _read(self) -> bytes:
        fd = os.open(self.secret_path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
                raise ValueError("not a regular file of this user")
            if info.st_mode & 0o077:
                raise ValueError(f"others may access it (mode {stat.S_IMODE(info.st_mode):o})")
            secret = os.read(fd, SECRET_BYTES + 1)
        finally:
            os.close(fd)
        if len(secret) != SECRET_BYTES:
            raise ValueError(f"it holds {len(secret)} bytes, not {SECRET_BYTES}")
        return secret

    def _create(self) -> bytes:
        """Write a new secret to a temporary file and link it into place: another server racing us wins or loses whole."""
        self.secret_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temporary = self.secret_path.with_name(f".{self.secret_path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, secrets.token_bytes(SECRET_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temporary, self.secret_path)
        except FileExistsError:
            pass  # another server made it first: use theirs
        finally:
            temporary.unlink()
        return self._read()
