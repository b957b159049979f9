"""Per-cluster TLS credentials (CA, certificate, key) and private files and folders: made, checked, handed out.

Every cluster the server starts gets its own certificate authority, made at creation with
``cryptography`` (the recipe of ``distributed.Security.temporary``): one certificate and key,
signed by that CA, serve scheduler, workers, clients and the dashboard. The CA's private key is
thrown away once it has signed, so no further certificate can ever be issued for the cluster. The
files live in ``<cluster workdir>/tls/`` (the folder 0700, the files 0600): whoever can read them
is this user, and whoever cannot is refused at the TLS handshake by the scheduler, every worker
and the dashboard. A restarted server finds them again in the same place.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import ssl
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

TLS_FOLDER = "tls"
CA_FILE, CERT_FILE, KEY_FILE = "ca.pem", "cert.pem", "key.pem"
#: How long a cluster's certificate is valid; clusters that live longer need a new one (a new cluster).
VALIDITY = datetime.timedelta(days=365)
#: Environment of every scheduler and worker started with credentials: no plain connection in or out.
REQUIRE_ENCRYPTION = {"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True"}
#: Shown in a cluster's events (and logged) when its template turned TLS off.
PLAIN_WARNING = (
    "TLS is off for this cluster (its template says tls: false): anyone who can reach its scheduler "
    "can run code as you, and its dashboard can be read by every user of this host"
)


class UnsafePath(PermissionError):
    """A file or folder that others can read or write, or that belongs to someone else."""


def _refuse_unless_ours(path: Path, info: os.stat_result) -> None:
    if info.st_uid != os.getuid():
        raise UnsafePath(
            f"{path} belongs to uid {info.st_uid}, not to this user (uid {os.getuid()}): refusing to use it"
        )


def private_folder(path: Path, narrow: bool = True) -> Path:
    """Make ``path`` (and missing parents) a folder only this user may enter; refuse one others own or can write.

    A new folder is made 0700. One of ours that others can enter or list loses those bits (with a log
    line) when ``narrow``; else (a folder the site chose, e.g. the store's) that is only logged.

    Raises
    ------
    UnsafePath
        When the folder (or a symlink in its place) belongs to another user, others can write in it
        (they could put their own files in place of ours), or it is not a folder.
    """
    path = Path(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePath(f"{path} is not a folder (a symlink or a file is in its place): refusing to use it")
    _refuse_unless_ours(path, info)
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        raise UnsafePath(f"{path} can be written by other users (mode {mode:o}): refusing to use it")
    if mode & 0o055 and narrow:
        log.warning("%s could be read by other users (mode %o): narrowed to %o", path, mode, mode & 0o700)
        os.chmod(path, mode & 0o700)
    elif mode & 0o055:
        log.warning("%s can be read by other users (mode %o): the files in it are kept 0600", path, mode)
    return path


def private_file(path: Path) -> None:
    """Take group and other bits off an existing file of this user (with a log line when it had any).

    Raises
    ------
    UnsafePath
        When the file belongs to another user or is not a regular file.
    """
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        raise UnsafePath(f"{path} is not a regular file: refusing to use it")
    _refuse_unless_ours(path, info)
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        log.warning("%s was open to other users (mode %o): narrowed to %o", path, mode, mode & 0o700)
        os.chmod(path, mode & 0o700)


def private_paths(folders: Iterable[Path] = (), files: Iterable[Path] = (), shared_folder: Path | None = None) -> None:
    """Make ``folders`` (and those of ``files`` that exist) this user's alone; ``shared_folder`` may be a site's.

    A folder a site chose (e.g. the store's) is left as it is when no one else can write there.

    Raises
    ------
    UnsafePath
        When another user owns or can write one of them.
    """
    for folder in folders:
        private_folder(folder)
    if shared_folder is not None:
        private_folder(shared_folder, narrow=False)
    for path in files:
        if path.exists():
            private_file(path)


def _write_private(path: Path, data: bytes) -> None:
    """Write a new file with mode 0600 from the start (never readable by others, not even for a moment)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(data)


@dataclass(frozen=True)
class ClusterCredentials:
    """The TLS files of one cluster: where they are, and what schedulers, workers and clients make of them.

    Attributes
    ----------
    ca_file, cert, key : Path
        The cluster's CA certificate, and the certificate and private key every member presents.
    """

    ca_file: Path
    cert: Path
    key: Path

    @classmethod
    def in_folder(cls, workdir: Path) -> ClusterCredentials:
        """Where a cluster of ``workdir`` keeps them (``workdir/tls``), whether or not they are made yet."""
        folder = Path(workdir) / TLS_FOLDER
        return cls(folder / CA_FILE, folder / CERT_FILE, folder / KEY_FILE)

    def exist(self) -> bool:
        return all(path.exists() for path in (self.ca_file, self.cert, self.key))

    @classmethod
    def create(cls, workdir: Path) -> ClusterCredentials:
        """Fresh credentials in ``workdir/tls`` (see :meth:`make`)."""
        credentials = cls.in_folder(workdir)
        credentials.make()
        return credentials

    def make(self) -> None:
        """Write a fresh CA certificate, and one certificate and key it signs, to these paths (folder 0700, files 0600).

        Blocking (a few milliseconds; tens on a busy machine): the server calls it in an executor.
        """
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        folder = private_folder(self.key.parent)
        now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)  # clock skew
        # Elliptic-curve keys: made in well under a millisecond (RSA 2048 takes about 50 ms).
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"clustermgr-lab CA {folder.parent.name}")])
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )  # keyCertSign, cRLSign
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        member = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dask-internal")])
        cert = (
            x509.CertificateBuilder()
            .subject_name(member)
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("dask-internal")]), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )  # the CA's key is not kept: nothing else can ever be signed for this cluster
        _write_private(self.ca_file, ca_cert.public_bytes(serialization.Encoding.PEM))
        _write_private(self.cert, cert.public_bytes(serialization.Encoding.PEM))
        _write_private(
            self.key,
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
        )

    @classmethod
    def find(cls, workdir: Path) -> ClusterCredentials | None:
        """The credentials a cluster of ``workdir`` was made with (None when it has none: TLS was off).

        Their folder and files are checked (this user's, closed to others) before they are used.
        """
        credentials = cls.in_folder(workdir)
        if not credentials.exist():
            return None
        private_folder(credentials.key.parent)
        for path in (credentials.ca_file, credentials.cert, credentials.key):
            private_file(path)
        return credentials

    @classmethod
    def from_paths(cls, paths: dict[str, Any]) -> ClusterCredentials:
        """From the API's ``tls`` object (``{"ca_file", "cert", "key"}``)."""
        return cls(Path(paths["ca_file"]), Path(paths["cert"]), Path(paths["key"]))

    def to_dict(self) -> dict[str, str]:
        """The file paths, as in the API's ``tls`` object: only their owner can read the files they name."""
        return {"ca_file": str(self.ca_file), "cert": str(self.cert), "key": str(self.key)}

    def regular_files(self) -> None:
        """Raise :class:`UnsafePath` unless each path (symbolic links followed) is a regular file.

        Opening a FIFO (or a device) blocks until someone writes to it: such a path is refused before
        anything opens it. ``os.stat`` itself can block on a hung network file system: see
        :meth:`ssl_context_off_loop`, which calls this in a thread.
        """
        for path in (self.ca_file, self.cert, self.key):
            try:
                info = os.stat(path)
            except OSError as exc:
                raise UnsafePath(f"{path} cannot be read: {exc.strerror}") from None
            if not stat.S_ISREG(info.st_mode):
                raise UnsafePath(f"{path} is not a regular file: refusing to open it")

    def checked_client_ssl_context(self) -> ssl.SSLContext:
        """:meth:`client_ssl_context` from files checked by :meth:`regular_files` first; blocking (call it in a thread)."""
        self.regular_files()
        return self.client_ssl_context()

    async def ssl_context_off_loop(self, timeout: float = 10.0) -> ssl.SSLContext:
        """:meth:`checked_client_ssl_context` in a thread: the event loop never waits on a file.

        Raises
        ------
        UnsafePath
            When a path is not a regular file, cannot be read, or checking and reading take longer than ``timeout``.
        """
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(None, self.checked_client_ssl_context), timeout)
        except asyncio.TimeoutError:
            raise UnsafePath(f"reading the certificate files took more than {timeout:g} s") from None

    def security(self, **kwargs: Any):
        """A ``distributed.Security`` for every role (client, scheduler, worker), encryption required."""
        from distributed import Security

        files = {}
        for role in ("client", "scheduler", "worker"):
            files[f"tls_{role}_cert"] = str(self.cert)
            files[f"tls_{role}_key"] = str(self.key)
        return Security(tls_ca_file=str(self.ca_file), require_encryption=True, **files, **kwargs)

    def cli_arguments(self) -> list[str]:
        """The ``--tls-*`` arguments of ``dask scheduler`` and ``dask worker``."""
        return ["--tls-ca-file", str(self.ca_file), "--tls-cert", str(self.cert), "--tls-key", str(self.key)]

    def environment(self) -> dict[str, str]:
        """DASK_* settings of a scheduler or worker: encryption required; the dashboard over HTTPS with these files.

        The dashboard's client certificate is required by :func:`require_dashboard_client_certificates`
        (the scheduler preload): distributed's own setting only encrypts.
        """
        comm = "DASK_DISTRIBUTED__COMM__TLS__"
        return {
            **REQUIRE_ENCRYPTION,
            **self.dashboard_environment(),
            # also through the config: `dask scheduler --interface` cannot take --tls-* (see scheduler_command)
            f"{comm}CA_FILE": str(self.ca_file),
            f"{comm}SCHEDULER__CERT": str(self.cert),
            f"{comm}SCHEDULER__KEY": str(self.key),
        }

    def dashboard_environment(self) -> dict[str, str]:
        """DASK_* settings that serve a scheduler's dashboard, or a worker's HTTP routes, over HTTPS with these files.

        The client certificate is then required by :func:`require_dashboard_client_certificates` (the
        scheduler's and the workers' preloads): distributed's own setting only encrypts.
        """
        prefix = "DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__"
        return {f"{prefix}CA_FILE": str(self.ca_file), f"{prefix}CERT": str(self.cert), f"{prefix}KEY": str(self.key)}

    def worker_environment(self) -> dict[str, str]:
        """DASK_* settings that give a worker (and its Nanny) these files through Dask's config, encryption required.

        For workers whose command line takes no ``--tls-*`` arguments (the SSH backend's ``dask_spec``).
        """
        prefix = "DASK_DISTRIBUTED__COMM__TLS__"
        return {
            **REQUIRE_ENCRYPTION,
            f"{prefix}CA_FILE": str(self.ca_file),
            f"{prefix}WORKER__CERT": str(self.cert),
            f"{prefix}WORKER__KEY": str(self.key),
        }

    def client_ssl_context(self) -> ssl.SSLContext:
        """A client-side context that presents the cluster's certificate and trusts only its CA (dashboard proxy)."""
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(self.ca_file))
        context.check_hostname = False  # one certificate for every member, whatever its address; the CA pins it
        context.load_cert_chain(str(self.cert), str(self.key))
        return context


def require_dashboard_client_certificates(node) -> None:
    """Make a scheduler's HTTPS dashboard (or a worker's HTTP server) refuse a peer without the cluster's certificate.

    distributed serves the dashboard over HTTPS when ``distributed.scheduler.dashboard.tls.cert`` is
    set, but asks no client certificate; a worker's own HTTP server (``/health``, ``/metrics``) reads
    the same settings. Its server context (tornado keeps the same object and wraps each new
    connection with it) is switched to ``CERT_REQUIRED``; a connection accepted before that (between
    the server's listen and this preload) is closed.
    """
    server = getattr(node, "http_server", None)
    if server is None and hasattr(node, "services"):
        server = node.services.get("dashboard")
    context = getattr(server, "ssl_options", None)
    if not isinstance(context, ssl.SSLContext):
        return  # a plain dashboard: TLS is off for this cluster
    context.verify_mode = ssl.CERT_REQUIRED
    for connection in list(getattr(server, "_connections", ())):
        connection.stream.close()
