"""What another user of the host can get from alice's cluster: the two-user hub test's attacker (ui-tests/hub/).

Run as root with the victim's cluster manager folders and her server's URL; it lists the targets (the
cluster's scheduler and dashboard addresses from its scheduler file, every file and socket of her cluster
manager), then runs itself again as the attacker (``runuser -u bob``) to try each, and prints one JSON report:
``{"uid": ..., "targets": {...}, "attempts": {name: {"refused": bool, "detail": str}}}``.

    python other_user_probe.py --as bob --user-dir RUN/hub/users/alice --cluster ID
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import shutil
import socket
import sqlite3
import ssl
import stat
import subprocess
import sys
import urllib.parse
from pathlib import Path

CONNECT_TIMEOUT = 10  # seconds a refused Client attempt may take (distributed retries until then)


def server_url_of(user_dir: Path) -> str:
    """The direct URL (its own port, not the hub's) of the single-user server configured from ``user_dir``."""
    config = str(user_dir / "config")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = dict(
                line.split("=", 1) for line in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in line
            )
        except OSError:
            continue
        if environ.get("JUPYTER_CONFIG_PATH") == config and "JUPYTERHUB_SERVICE_URL" in environ:
            return environ["JUPYTERHUB_SERVICE_URL"]
    raise LookupError(f"no single-user server runs with the configuration in {config}")


def targets(user_dir: Path, cluster_id: str, server_url: str) -> dict:
    """What root sees of alice's cluster: addresses, and her cluster manager's files, sockets and folders."""
    workdir = user_dir / "clustermgr"
    info = json.loads((workdir / cluster_id / "scheduler.json").read_text())
    files, sockets, folders = [], [], []
    for top in (workdir, user_dir / "store"):
        for folder, _, names in os.walk(top):
            folders.append(folder)
            for name in names:
                path = os.path.join(folder, name)
                mode = os.lstat(path).st_mode
                if stat.S_ISSOCK(mode):
                    sockets.append(path)
                elif stat.S_ISREG(mode):
                    files.append(path)
    return {
        "scheduler_address": info["address"],
        "dashboard_address": f"127.0.0.1:{info['services']['dashboard']}",
        "server_url": server_url,
        "files": sorted(files),
        "sockets": sorted(sockets),
        "folders": sorted(folders),
    }


def refused_when(attempt) -> dict:
    """Run ``attempt``: refused if it raises; if it returns, the returned text says what was obtained."""
    try:
        obtained = attempt()
    except Exception as error:  # any failure is a refusal; its kind is reported
        return {"refused": True, "detail": f"{type(error).__name__}: {error}"[:300]}
    return {"refused": False, "detail": str(obtained)[:300]}


def client_attempt(address: str, security=None):
    from distributed import Client

    async def connect():
        async with Client(address, security=security, timeout=CONNECT_TIMEOUT, asynchronous=True) as client:
            info = client.scheduler_info()
            return f"connected: {len(info.get('workers', {}))} workers"

    return lambda: asyncio.run(connect())


def http_get(url: str, tls: bool) -> str:
    """GET ``url`` without following redirects; returns what was read, raises when nothing readable came back."""
    parts = urllib.parse.urlsplit(url)
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        connection = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=CONNECT_TIMEOUT, context=context)
    else:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=CONNECT_TIMEOUT)
    try:
        connection.request("GET", parts.path or "/")
        response = connection.getresponse()
        body = response.read(2000)
    finally:
        connection.close()
    if response.status >= 300:
        raise PermissionError(f"HTTP {response.status} {response.reason} (location {response.getheader('Location')})")
    return f"HTTP {response.status}: {body[:200]!r}"


def open_file(path: str):
    def attempt():
        with open(path, "rb") as f:
            return f"read {len(f.read(100))} bytes"

    return attempt


def write_into(folder: str):
    def attempt():
        probe = Path(folder) / "written-by-another-user"
        probe.write_text("x")
        probe.unlink()
        return "created a file"

    return attempt


def connect_socket(path: str):
    def attempt():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(CONNECT_TIMEOUT)
            s.connect(path)
            return "connected"

    return attempt


def open_store(path: str):
    def attempt():
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return f"tables: {db.execute('select name from sqlite_master').fetchall()}"

    return attempt


def attack(found: dict) -> dict:
    """Every attempt another user can make on alice's cluster, run as that user."""
    from distributed.security import Security

    address = found["scheduler_address"]
    host_port = address.split("://", 1)[1]
    attempts = {
        "client plain tcp": client_attempt(f"tcp://{host_port}"),
        "client tls, own certificate": client_attempt(f"tls://{host_port}", Security.temporary()),
    }
    pems = [f for f in found["files"] if f.endswith(".pem")]
    if pems:
        directory = os.path.dirname(pems[0])
        attempts["client tls, alice's certificate files"] = lambda: client_attempt(
            f"tls://{host_port}",
            Security(
                tls_ca_file=f"{directory}/ca.pem",
                tls_client_cert=f"{directory}/cert.pem",
                tls_client_key=f"{directory}/key.pem",
                require_encryption=True,
            ),
        )()
    dashboard = found["dashboard_address"]
    for path in ("/status", "/info/main/workers.html", "/json/identity.json"):
        attempts[f"dashboard http {path}"] = lambda p=path: http_get(f"http://{dashboard}{p}", tls=False)
        attempts[f"dashboard https {path}"] = lambda p=path: http_get(f"https://{dashboard}{p}", tls=True)
    server = found["server_url"].rstrip("/")
    attempts["alice's server, directly: clusters"] = lambda: http_get(f"{server}/clustermgr/api/clusters", tls=False)
    attempts["alice's server, directly: contents"] = lambda: http_get(f"{server}/api/contents", tls=False)
    for path in found["files"]:
        attempts[f"open {path}"] = open_file(path)
        if path.endswith(".sqlite3"):
            attempts[f"sqlite {path}"] = open_store(path)
    for path in found["sockets"]:
        attempts[f"connect {path}"] = connect_socket(path)
    for folder in found["folders"]:
        attempts[f"write into {folder}"] = write_into(folder)
    return {name: refused_when(attempt) for name, attempt in attempts.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--as", dest="user", help="the attacker (root runs the attempts as this user)")
    parser.add_argument("--user-dir", type=Path, help="the victim's folder (its clustermgr/ and store/)")
    parser.add_argument("--cluster", help="the victim's cluster id")
    parser.add_argument("--server-url", help="the victim's single-user server (default: found in /proc)")
    parser.add_argument("--attack", help="(internal) the targets as JSON: run the attempts as this process's user")
    args = parser.parse_args()
    if args.attack:
        print(json.dumps({"uid": os.getuid(), "attempts": attack(json.loads(args.attack))}))
        return 0
    found = targets(args.user_dir, args.cluster, args.server_url or server_url_of(args.user_dir))
    run = subprocess.run(
        [
            shutil.which("runuser") or "/usr/sbin/runuser",
            "-u",
            args.user,
            "--",
            sys.executable,
            os.path.abspath(__file__),
            "--attack",
            json.dumps(found),
        ],
        capture_output=True,
        text=True,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        timeout=600,
    )
    if run.returncode:
        print(run.stderr, file=sys.stderr)
        return run.returncode
    report = json.loads(run.stdout.strip().splitlines()[-1])
    print(json.dumps({"targets": found, **report}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
