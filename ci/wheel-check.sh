#!/usr/bin/env bash
# wheel-check.sh - the package as shipped: build the sdist and the wheel, install the wheel into a clean venv on
# a PATH without Node.js, and use it there (`make test` runs it; `make wheel-check` alone).
#
#   1. python -m build: the sdist, then the wheel built from that sdist (the frontend comes prebuilt in the
#      sdist: clustermgr_lab/labextension must exist, as `make install` leaves it);
#   2. a new venv (python3 -m venv) gets the wheel and its dependencies from PyPI (pip), then `pip check`;
#   3. with PATH = that venv's bin and a folder of a few shell tools (no node, npm or yarn), and Jupyter's and
#      Dask's config folders empty: `jupyter server extension list` must show clustermgr_lab enabled and
#      jupyter_server_proxy not disabled, `jupyter labextension list` clustermgr-lab enabled and
#      @jupyterhub/jupyter-server-proxy not disabled;
#   4. `jupyter server` on a free 127.0.0.1 port: a cluster is created through the REST API, runs with one
#      worker, and is deleted; then the server is stopped (SIGTERM) and everything is removed;
#   5. side by side: dask-labextension (DASK_LABEXTENSION_VERSION, 7.0.0) joins the venv; both server and lab
#      extensions are listed enabled, and each makes, lists and deletes a cluster through its own API.
#
# Environment: BUILD_PYTHON (default: .venv's python) runs the build and the leftover check (it needs `build` and
# psutil: the test extras have them); PYTHON (python3) makes the clean venv; WHEEL_CHECK_DIR (a new folder under
# /tmp) is where it all happens.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_PYTHON="${BUILD_PYTHON:-$REPO/.venv/bin/python}"
BASE_PYTHON="${PYTHON:-python3}"
DASK_LABEXTENSION_VERSION="${DASK_LABEXTENSION_VERSION:-7.0.0}"
WORK="${WHEEL_CHECK_DIR:-$(mktemp -d /tmp/clustermgr-wheel-check.XXXXXX)}"
mkdir -p "$WORK"
SERVER_PID=""
started=$SECONDS

# Processes of this check: their command line or working folder is below $WORK (a scheduler that sets its process
# title hides its command line, not its folder).
leftovers() {
  "$BUILD_PYTHON" -c 'import os, psutil, sys
for p in psutil.process_iter(["cmdline", "cwd"]):
    if p.pid == os.getpid():
        continue  # this one names the folder too
    if any(sys.argv[1] in part for part in (p.info["cmdline"] or [])) or (p.info["cwd"] or "").startswith(sys.argv[1]):
        print(p.pid)' "$WORK/"
}
step() { printf '[wheel-check %3ds] %s\n' $((SECONDS - started)) "$*"; }
cleanup() {
  local rc=$?
  set +e  # every step of the clean-up runs
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2> /dev/null; then
    kill -TERM "$SERVER_PID" 2> /dev/null || true
    for _ in $(seq 100); do kill -0 "$SERVER_PID" 2> /dev/null || break; sleep 0.2; done
    kill -KILL "$SERVER_PID" 2> /dev/null || true
  fi
  # whatever of the check still runs (a failed run's launcher, scheduler or workers): its command line names $WORK
  left=$(leftovers || true)
  [ -n "$left" ] && kill -KILL $left 2> /dev/null
  rm -rf "$WORK"
  [ $rc = 0 ] && step "passed" || step "FAILED (exit $rc)"
  exit $rc
}
trap cleanup EXIT

[ -f "$REPO/clustermgr_lab/labextension/package.json" ] \
  || { echo "wheel-check: build the frontend first (make install): clustermgr_lab/labextension is missing" >&2; exit 1; }

step "python -m build (sdist, then the wheel from it) into $WORK/dist"
"$BUILD_PYTHON" -m build --outdir "$WORK/dist" "$REPO" > "$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log" >&2; exit 1; }
sdist=$(ls "$WORK"/dist/*.tar.gz) wheel=$(ls "$WORK"/dist/*.whl)
step "built $(basename "$sdist") and $(basename "$wheel")"
# The sdist carries the prebuilt frontend; the wheel installs it and the server config, and none for other packages
"$BUILD_PYTHON" - "$sdist" "$wheel" << 'EOF'
import sys, tarfile, zipfile

sdist = tarfile.open(sys.argv[1]).getnames()
wheel = zipfile.ZipFile(sys.argv[2]).namelist()
assert any(n.endswith("/clustermgr_lab/labextension/package.json") for n in sdist), "the sdist has no built frontend"
assert any(n.endswith("etc/jupyter/jupyter_server_config.d/clustermgr_lab.json") for n in wheel), "no server config"
assert any(n.endswith("labextensions/clustermgr-lab/package.json") for n in wheel), "the wheel has no lab extension"
others = [n for n in wheel if "jupyter_server_config.d/" in n and not n.endswith("/clustermgr_lab.json")]
assert not others, f"the wheel configures other packages: {others}"
EOF

step "a clean venv, the wheel and its dependencies (pip)"
"$BASE_PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel" > "$WORK/pip.log" 2>&1 \
  || { tail -40 "$WORK/pip.log" >&2; exit 1; }
"$WORK/venv/bin/python" -m pip check --disable-pip-version-check

# A machine without Node.js: the venv, and a few tools a Jupyter server's children may call.
mkdir -p "$WORK/bin"
for tool in sh bash env cat ls uname id ps; do
  path=$(command -v "$tool" || true)
  [ -n "$path" ] && ln -s "$path" "$WORK/bin/$tool"
done
mkdir -p "$WORK/home" "$WORK/jupyter-config" "$WORK/jupyter-data" "$WORK/runtime" "$WORK/dask" "$WORK/root"
# `env -i` execs the command: a command started in the background keeps that pid (the server's is $!)
CLEAN_ENV=(env -i PATH="$WORK/venv/bin:$WORK/bin" HOME="$WORK/home" LANG=C.UTF-8
  JUPYTER_CONFIG_DIR="$WORK/jupyter-config" JUPYTER_DATA_DIR="$WORK/jupyter-data"
  JUPYTER_RUNTIME_DIR="$WORK/runtime" DASK_CONFIG="$WORK/dask"
  CLUSTERMGR_TEST_RUN="${CLUSTERMGR_TEST_RUN:-}")
in_venv() { "${CLEAN_ENV[@]}" "$@"; }
if in_venv sh -c 'command -v node || command -v npm || command -v yarn'; then
  echo "wheel-check: node is on the clean PATH" >&2
  exit 1
fi

step "jupyter server extension list / jupyter labextension list"
no_colour() { sed 's/\x1b\[[0-9;]*m//g'; }
extensions=$(in_venv jupyter server extension list 2>&1 | no_colour)
echo "$extensions" | grep -Eq 'clustermgr_lab[[:space:]]+enabled' \
  || { echo "wheel-check: clustermgr_lab is not enabled:" >&2; echo "$extensions" >&2; exit 1; }
echo "$extensions" | grep -Eq 'jupyter_server_proxy[[:space:]]+enabled' \
  || { echo "wheel-check: jupyter_server_proxy is not enabled:" >&2; echo "$extensions" >&2; exit 1; }
labextensions=$(in_venv jupyter labextension list 2>&1 | no_colour)
echo "$labextensions" | grep -Eq 'clustermgr-lab v[^ ]+ enabled' \
  || { echo "wheel-check: clustermgr-lab is not enabled:" >&2; echo "$labextensions" >&2; exit 1; }
echo "$labextensions" | grep -Eq '@jupyterhub/jupyter-server-proxy v[^ ]+ enabled' \
  || { echo "wheel-check: jupyter-server-proxy's lab extension is not enabled:" >&2; echo "$labextensions" >&2; exit 1; }

# Nor does its lab extension turn another one off (JupyterLab reads disabledExtensions from every extension)
in_venv python - << 'EOF'
import json, sys

data = json.load(open(f"{sys.prefix}/share/jupyter/labextensions/clustermgr-lab/package.json"))
disabled = data.get("jupyterlab", {}).get("disabledExtensions", [])
assert not disabled, f"clustermgr-lab's lab extension disables {disabled}"
EOF

start_server() {
  port=$("$WORK/venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  token=$("$WORK/venv/bin/python" -c 'import secrets; print(secrets.token_hex(16))')
  "${CLEAN_ENV[@]}" jupyter server --ip=127.0.0.1 --port="$port" --port-retries=0 --no-browser --allow-root \
    --IdentityProvider.token="$token" --ServerApp.root_dir="$WORK/root" \
    --ClusterManager.workdir="$WORK/clusters" --ClusterManager.store_path="$WORK/store/clusters.sqlite3" \
    --ClusterManager.on_shutdown=stop > "$WORK/server.log" 2>&1 &
  SERVER_PID=$!
}

stop_server() {
  kill -TERM "$SERVER_PID"
  for _ in $(seq 150); do kill -0 "$SERVER_PID" 2> /dev/null || break; sleep 0.2; done
  if kill -0 "$SERVER_PID" 2> /dev/null; then echo "wheel-check: the server did not stop on SIGTERM" >&2; exit 1; fi
  wait "$SERVER_PID" || true
  SERVER_PID=""
  # Nothing of it is left: the warm launcher and the cluster's processes went with the server
  for _ in $(seq 75); do [ -z "$(leftovers)" ] && break; sleep 0.2; done
  if [ -n "$(leftovers)" ]; then
    echo "wheel-check: still running after the server stopped:" >&2
    ps -o pid,cmd -p "$(leftovers | paste -sd,)" >&2
    exit 1
  fi
}

# What both server runs do, through the REST API(s)
cat > "$WORK/use_server.py" << 'EOF'
"""Create a cluster of one worker through the REST API, wait until it runs, delete it, wait until it is gone.

With --beside-dask-labextension, dask-labextension's API makes a cluster of its own first; each API lists only its
own, and both are deleted.
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request

port, token, server_pid = sys.argv[1:4]
beside = "--beside-dask-labextension" in sys.argv[4:]
api = f"http://127.0.0.1:{port}/clustermgr/api"


def call(method, path, body=None):
    request = urllib.request.Request(
        api + path, method=method, data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, json.loads(response.read() or b"null")


def until(what, check, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        os.kill(int(server_pid), 0)  # the server exited: fail now, with its log
        try:
            found = check()
        except (urllib.error.URLError, ConnectionError):
            found = None
        if found:
            return found
        time.sleep(0.3)
    sys.exit(f"wheel-check: timed out waiting for {what}")


until("the server to answer", lambda: call("GET", "/clusters")[0] == 200)
dask_api = f"http://127.0.0.1:{port}/dask/clusters"


def dask_call(method, path="", body=None):
    request = urllib.request.Request(dask_api + path, method=method, data=body,
                                     headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return response.status, json.loads(response.read() or b"null")


theirs = None
if beside:
    status, theirs = dask_call("PUT", "/", b"")
    assert status == 200 and theirs["id"], (status, theirs)
    print(f"wheel-check: dask-labextension made its cluster {theirs['id']} ({theirs['scheduler_address']})")
status, cluster = call("POST", "/clusters", {"name": "wheel-check", "spec": {"groups": [
    {"name": "default", "count": 1, "threads": 1, "memory": "256 MiB"}]}})
assert status == 202, (status, cluster)
running = until("the cluster to run with 1 worker", lambda: (lambda c: c if c["status"] == "running"
                and c["workers"]["running"] == 1 else None)(call("GET", f"/clusters/{cluster['id']}")[1]))
print(f"wheel-check: cluster {running['id']} running, scheduler {running['scheduler_address']}")
status, _ = call("DELETE", f"/clusters/{cluster['id']}")
assert status in (200, 202, 204), status
until("the cluster to be gone", lambda: not call("GET", "/clusters")[1]["clusters"])
print("wheel-check: cluster deleted")
if beside:
    status, listed = dask_call("GET", "/")
    assert status == 200 and [c["id"] for c in listed] == [theirs["id"]], listed
    status, _ = dask_call("DELETE", f"/{theirs['id']}")
    assert status in (200, 204), status
    until("dask-labextension's cluster to be gone", lambda: dask_call("GET", "/")[1] == [])
    print("wheel-check: dask-labextension's cluster deleted")
EOF

step "jupyter server on 127.0.0.1: create, run and delete a cluster through the REST API"
start_server
in_venv python "$WORK/use_server.py" "$port" "$token" "$SERVER_PID" || { tail -40 "$WORK/server.log" >&2; exit 1; }
stop_server

step "side by side with dask-labextension $DASK_LABEXTENSION_VERSION: both extensions on, both APIs work"
"$WORK/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "dask-labextension==$DASK_LABEXTENSION_VERSION" >> "$WORK/pip.log" 2>&1 || { tail -40 "$WORK/pip.log" >&2; exit 1; }
"$WORK/venv/bin/python" -m pip check --disable-pip-version-check
extensions=$(in_venv jupyter server extension list 2>&1 | no_colour)
labextensions=$(in_venv jupyter labextension list 2>&1 | no_colour)
for pattern in 'clustermgr_lab[[:space:]]+enabled' 'dask_labextension[[:space:]]+enabled' \
  'jupyter_server_proxy[[:space:]]+enabled'; do
  echo "$extensions" | grep -Eq "$pattern" || { echo "wheel-check: not /$pattern/:" >&2; echo "$extensions" >&2; exit 1; }
done
for pattern in 'clustermgr-lab v[^ ]+ enabled' 'dask-labextension v[^ ]+ enabled'; do
  echo "$labextensions" | grep -Eq "$pattern" \
    || { echo "wheel-check: not /$pattern/:" >&2; echo "$labextensions" >&2; exit 1; }
done
start_server
in_venv python "$WORK/use_server.py" "$port" "$token" "$SERVER_PID" --beside-dask-labextension || { tail -40 "$WORK/server.log" >&2; exit 1; }
stop_server
