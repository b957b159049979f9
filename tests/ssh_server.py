"""A private sshd for the tests and the benchmarks: Debian's ``/usr/sbin/sshd`` on a free port of 127.0.0.1.

It has a host key, a client key, a config and a known_hosts file of its own in the folder it is given
(key authentication for this user only); the system sshd and ``~/.ssh`` are not used. Every process
started over SSH is a descendant of it, which is how callers find them in the process table.
``make test`` installs openssh-server.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .server_process import free_port

SSHD = "/usr/sbin/sshd"


@dataclass
class PrivateSshd:
    process: subprocess.Popen
    port: int
    #: ``SSHBackend.connect_options`` that reach it (asyncssh's ``connect`` arguments).
    connect_options: dict
    log: Path


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)


def start_sshd(folder: Path, timeout: float = 30.0) -> PrivateSshd:
    """Start a private sshd accepting one generated key, its files in ``folder``; returns once it listens.

    Raises
    ------
    RuntimeError
        sshd or ssh-keygen is missing, or sshd exited or did not listen within ``timeout`` s (its log quoted).
    """
    if not (os.path.exists(SSHD) and shutil.which("ssh-keygen")):
        raise RuntimeError(
            f"{SSHD} or ssh-keygen is missing: `make test` installs them (apt-get install openssh-server)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    host_key, client_key = folder / "host_ed25519", folder / "client_ed25519"
    _keygen(host_key)
    _keygen(client_key)
    (folder / "authorized_keys").write_text(client_key.with_suffix(".pub").read_text())
    port = free_port()
    user = getpass.getuser()
    config = folder / "sshd_config"
    config.write_text(
        f"Port {port}\n"
        "ListenAddress 127.0.0.1\n"
        f"HostKey {host_key}\n"
        f"PidFile {folder / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {folder / 'authorized_keys'}\n"
        f"AllowUsers {user}\n"
        "PermitRootLogin prohibit-password\n"
        "PubkeyAuthentication yes\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "UsePAM no\n"
        "StrictModes no\n"  # the temporary folder's modes are not sshd's business here
        "MaxStartups 100\n"
        "LogLevel VERBOSE\n"
    )
    host_public_key = host_key.with_suffix(".pub").read_text().split()
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_public_key[0]} {host_public_key[1]}\n")
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    log = folder / "sshd.log"
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(config)], stdout=log_file, stderr=log_file, start_new_session=True
        )
    sshd = PrivateSshd(
        process,
        port,
        {
            "port": port,
            "username": user,
            "known_hosts": str(folder / "known_hosts"),
            "client_keys": [str(client_key)],
            "agent_path": None,
            "config": None,  # no ~/.ssh/config
        },
        log,
    )
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"sshd exited with {process.returncode}: {log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return sshd
        except OSError:
            if time.monotonic() > deadline:
                stop_sshd(sshd)
                raise RuntimeError(f"sshd did not listen within {timeout:g} s: {log.read_text()}") from None
            time.sleep(0.05)


def stop_sshd(sshd: PrivateSshd) -> None:
    """Stop it (TERM, then KILL after 10 s); the sessions it still has end with it."""
    sshd.process.terminate()
    try:
        sshd.process.wait(10)
    except subprocess.TimeoutExpired:
        sshd.process.kill()
        sshd.process.wait()
