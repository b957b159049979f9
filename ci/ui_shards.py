"""Runs the galata UI tests as N Playwright shards side by side, each with a JupyterLab server of its own.

The specs share a server and its real clusters, so one Playwright process runs them one at a time. Shards are
separate processes: shard k of N starts its own server on a free port of 127.0.0.1 that this script picks and
passes as ``UI_TEST_PORT`` (its own store, work folder and root folder: ``jupyter_server_test_config.py``) and runs its own share of the spec files, so two
shards run two specs at once without seeing each other's clusters. Output lines are prefixed with the shard.

Usage: ``python ci/ui_shards.py [--shards 2] [--junit PREFIX] [-- extra playwright arguments]``
(with ``--junit``, shard k writes ``PREFIX-k.xml``; the exit code is the first failed shard's, else 0).
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

UI_TESTS = Path(__file__).resolve().parent.parent / "ui-tests"


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now (the kernel's choice for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shards",
        type=int,
        default=int(os.environ.get("UI_TEST_SHARDS", "2")),
        help="Playwright processes side by side (default: UI_TEST_SHARDS or 2)",
    )
    parser.add_argument("--junit", help="also write a JUnit report per shard: PREFIX-k.xml")
    parser.add_argument("playwright_args", nargs="*", help="passed to `playwright test` (after --)")
    args = parser.parse_args(argv)
    if args.shards < 1:
        parser.error("--shards must be at least 1")
    return args


def shard_command(
    shard: int, shards: int, junit: str | None, extra: list[str], port: int
) -> tuple[list[str], dict[str, str]]:
    """The command and environment of shard ``shard`` (1-based) of ``shards``, whose server listens on ``port``."""
    # the venv's jlpm (as `make` puts the venv first on PATH), also when this script is run by hand
    jlpm = shutil.which("jlpm", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    command = [jlpm or "jlpm", "playwright", "test", f"--shard={shard}/{shards}", *extra]
    env = {
        **os.environ,
        "CI": "1",
        "CHROMIUM_PATH": os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"),
        "UI_TEST_PORT": str(port),
        "UI_TEST_SHARD": str(shard),
    }
    if junit:
        command.append("--reporter=list,junit")
        env["PLAYWRIGHT_JUNIT_OUTPUT_NAME"] = f"{junit}-{shard}.xml"
    return command, env


def _copy_prefixed(stream, prefix: str, lock: threading.Lock) -> None:
    for line in iter(stream.readline, b""):
        with lock:
            sys.stdout.buffer.write(prefix.encode() + line)
            sys.stdout.buffer.flush()


def run_shards(shards: int, junit: str | None = None, extra: list[str] | None = None) -> int:
    """Run every shard at once and wait for all of them; the first failed shard's exit code, else 0."""
    lock = threading.Lock()
    running = []
    ports: set[int] = set()
    for shard in range(1, shards + 1):
        port = free_port()
        while port in ports:  # two shards never share one (the kernel may hand out a released port again)
            port = free_port()
        ports.add(port)
        command, env = shard_command(shard, shards, junit, extra or [], port)
        process = subprocess.Popen(
            command, cwd=UI_TESTS, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        prefix = f"[shard {shard}/{shards}] " if shards > 1 else ""
        print(f"{prefix}JupyterLab on 127.0.0.1:{port}", flush=True)
        copier = threading.Thread(target=_copy_prefixed, args=(process.stdout, prefix, lock), daemon=True)
        copier.start()
        running.append((process, copier))
    codes = []
    try:
        for process, copier in running:
            codes.append(process.wait())
            copier.join()
    finally:
        for process, _ in running:  # interrupted: stop the others (Playwright stops its server on SIGTERM)
            if process.poll() is None:
                process.terminate()
                process.wait()
    return next((code for code in codes if code != 0), 0)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # SIGTERM (e.g. make interrupted) ends the run through run_shards' finally: every shard is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return run_shards(args.shards, args.junit, args.playwright_args)


if __name__ == "__main__":
    sys.exit(main())
