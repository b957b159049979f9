#!/usr/bin/env bash
# start-hub.sh - a JupyterHub with two system users (alice, bob) for the two-user test (ui-tests/hub/).
#
#   ci/hub/start-hub.sh RUN_DIR    start it; RUN_DIR/hub/ then holds url, password, service-token, hub.log
#   ci/hub/stop-hub.sh RUN_DIR     stop it and undo what this start did (ci/services.sh calls both)
#
# What it does, all recorded in RUN_DIR/hub so that stop-hub.sh undoes exactly that:
#   - installs configurable-http-proxy from npm into ci/hub/node_modules (package-lock.json) when missing;
#   - creates the system users alice and bob (marked "clustermgr-lab test user", shell nologin, so no SSH or
#     console login) when missing, with one random password (root-only file, PAM checks it); refuses users
#     of those names that it did not make;
#   - lets alice and bob reach the checkout and its venv: every folder above them that they cannot
#     traverse (e.g. /root, when CI clones there) gets o+x (traverse, not list) until the stop; the files
#     themselves must be readable by others already (a clone with umask 022 is), which it checks;
#   - starts jupyterhub (as root: LocalProcessSpawner switches to the user) on 127.0.0.1, the public port
#     a free one (CLUSTERMGR_HUB_PORT to choose), and waits until it answers.
# The users' single-user servers run this checkout's code (PYTHONPATH) from the shared venv.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
log() { echo "[start-hub] $*"; }
die() { echo "[start-hub] ERROR: $*" >&2; exit 1; }
[ $# = 1 ] || { echo "usage: $0 RUN_DIR" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "must run as root (it creates users and switches to them)"
RUN_DIR=$(realpath -m "$1")
STATE="$RUN_DIR/hub"
USERS=(alice bob)
MARK="clustermgr-lab test user"
SECRETS=/var/lib/clustermgr-test-users  # the test users' password, while they exist (root only)
PYTHON="${CLUSTERMGR_HUB_PYTHON:-$REPO/.venv/bin/python}"
T0=$SECONDS

if [ -f "$STATE/hub.pid" ] && kill -0 "$(cat "$STATE/hub.pid")" 2>/dev/null; then
  log "already running for this run: $(cat "$STATE/url")"
  exit 0
fi
[ -x "$PYTHON" ] || die "no Python at $PYTHON (make install creates .venv; CLUSTERMGR_HUB_PYTHON chooses another)"
"$PYTHON" -c "import jupyterhub" 2> /dev/null || die "jupyterhub is not installed in $PYTHON's environment (pip install -e '.[test]')"
mkdir -p "$STATE/users"
# alice and bob traverse the run's folder to reach their own (0700) folders below it; nothing here is secret.
chmod 755 "$RUN_DIR" "$STATE" "$STATE/users"
touch "$STATE/created-users" "$STATE/opened-folders"

# ------------------------------------------------------------ configurable-http-proxy (npm)
CHP="$HERE/node_modules/.bin/configurable-http-proxy"
if [ ! -x "$CHP" ]; then
  log "installing configurable-http-proxy (npm ci in ci/hub)"
  (cd "$HERE" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error) || die "npm ci in $HERE failed"
fi

# ------------------------------------------------------------ users
mkdir -p -m 700 "$SECRETS"
for user in "${USERS[@]}"; do
  if entry=$(getent passwd "$user"); then
    [ "$(echo "$entry" | cut -d: -f5)" = "$MARK" ] || die "a user '$user' exists that this script did not create; refusing to use it"
  else
    useradd --create-home --shell /usr/sbin/nologin --comment "$MARK" "$user"
    echo "$user" >> "$STATE/created-users"
    log "created user $user"
  fi
done
if [ ! -s "$SECRETS/password" ]; then
  (umask 077 && "$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(18))' > "$SECRETS/password")
  for user in "${USERS[@]}"; do echo "$user:$(cat "$SECRETS/password")"; done | chpasswd
fi
(umask 077 && cp "$SECRETS/password" "$STATE/password")

# ------------------------------------------------------------ the checkout and venv, readable by the users
can() { runuser -u alice -- test "$@"; }
open_folder() {  # every folder from / down to $1 that alice cannot traverse gets o+x
  local path="" part
  IFS=/ read -ra parts <<< "$1"
  for part in "${parts[@]}"; do
    [ -n "$part" ] || continue
    path="$path/$part"
    if [ -d "$path" ] && ! can -x "$path"; then
      chmod o+x "$path"
      echo "$path" >> "$STATE/opened-folders"
      log "o+x on $path (until stop-hub.sh)"
    fi
  done
}
open_folder "$STATE/users"
open_folder "$REPO"
open_folder "$(dirname "$(realpath "$PYTHON")")"
open_folder "$(dirname "$PYTHON")"
# The users cannot write __pycache__ here: compile once, as root, or every server of theirs compiles it all again.
"$PYTHON" -m compileall -q "$REPO/clustermgr_lab" > /dev/null || true
check_import() {
  runuser -u "$1" -- env -i PATH=/usr/bin:/bin HOME=/tmp PYTHONPATH="$REPO" \
    "$PYTHON" -c 'import clustermgr_lab, jupyterhub' 2>&1
}
if ! out=$(check_import alice); then
  die "alice cannot import the extension from $PYTHON with $REPO (files must be readable by others: chmod -R o+rX): $out"
fi

# ------------------------------------------------------------ the hub
free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT="${CLUSTERMGR_HUB_PORT:-$(free_port)}"
JUPYTER_PATH_DIR=""
if [ -f "$REPO/clustermgr_lab/labextension/package.json" ]; then
  # This checkout's frontend, whatever the venv's labextension link points at.
  JUPYTER_PATH_DIR="$STATE/jupyter-path"
  mkdir -p "$JUPYTER_PATH_DIR/labextensions"
  ln -sfn "$REPO/clustermgr_lab/labextension" "$JUPYTER_PATH_DIR/labextensions/clustermgr-lab"
  chmod -R o+rX "$JUPYTER_PATH_DIR"
fi
(umask 077 && "$PYTHON" -c 'import secrets; print(secrets.token_hex(32))' > "$STATE/service-token")
echo "http://127.0.0.1:$PORT" > "$STATE/url"

cd "$STATE"
(umask 077 && "$PYTHON" -c 'import secrets; print(secrets.token_hex(32))' > "$STATE/proxy-token")
CONFIGPROXY_AUTH_TOKEN=$(cat "$STATE/proxy-token") \
CLUSTERMGR_HUB_STATE="$STATE" CLUSTERMGR_HUB_REPO="$REPO" CLUSTERMGR_HUB_PYTHON="$PYTHON" \
CLUSTERMGR_HUB_USERS="${USERS[*]}" CLUSTERMGR_HUB_PORT="$PORT" \
CLUSTERMGR_HUB_CHP="$CHP" CLUSTERMGR_HUB_SERVICE_TOKEN="$(cat "$STATE/service-token")" \
CLUSTERMGR_HUB_JUPYTER_PATH="$JUPYTER_PATH_DIR" \
  setsid "$(dirname "$PYTHON")/jupyterhub" -f "$HERE/jupyterhub_config.py" < /dev/null > "$STATE/hub.log" 2>&1 &
echo $! > "$STATE/hub.pid"

deadline=$((SECONDS + ${CLUSTERMGR_HUB_TIMEOUT:-120}))
until curl -fsS -o /dev/null "http://127.0.0.1:$PORT/hub/health" 2>/dev/null; do
  if ! kill -0 "$(cat "$STATE/hub.pid")" 2>/dev/null; then tail -30 "$STATE/hub.log" >&2; die "jupyterhub exited"; fi
  if [ $SECONDS -ge $deadline ]; then tail -30 "$STATE/hub.log" >&2; die "jupyterhub did not answer within ${CLUSTERMGR_HUB_TIMEOUT:-120} s"; fi
  sleep 0.5
done
log "JupyterHub ready at http://127.0.0.1:$PORT (users ${USERS[*]}) in $((SECONDS - T0)) s; state in $STATE"
