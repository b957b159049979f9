#!/usr/bin/env bash
# stop-hub.sh - stop the JupyterHub that ci/hub/start-hub.sh started for RUN_DIR and undo what it did:
# the hub (which stops the users' servers, their clusters and its proxy), then any process still working
# below RUN_DIR/hub or carrying the run's CLUSTERMGR_TEST_RUN, the o+x it gave to folders, and the users
# it created, with their homes, once their processes have exited (waiting up to 30 s for them; a process of
# another run keeps a user, and the script then fails).
set -uo pipefail

log() { echo "[stop-hub] $*"; }
[ $# = 1 ] || { echo "usage: $0 RUN_DIR" >&2; exit 2; }
RUN_DIR=$(realpath -m "$1")
STATE="$RUN_DIR/hub"
SECRETS=/var/lib/clustermgr-test-users
[ -d "$STATE" ] || exit 0
status=0

live() { [ -e "/proc/$1" ] && ! grep -q '^State:.*[ZX]' "/proc/$1/status" 2>/dev/null; }
wait_gone() {  # wait_gone SECONDS PID...: true once every PID is gone
  local deadline=$((SECONDS + $1)) pid; shift
  while :; do
    local alive=""
    for pid in "$@"; do live "$pid" && alive="$alive $pid"; done
    [ -z "$alive" ] && return 0
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.2
  done
}
# The hub's processes: the hub, its proxy and the users' servers, kernels, launchers, schedulers and workers.
ours() {
  local dir pid
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    [ "$pid" = $$ ] && continue
    case "$(readlink "$dir/cwd" 2>/dev/null)" in "$STATE"|"$STATE"/*) echo "$pid"; continue ;; esac
    if [ -n "${CLUSTERMGR_TEST_RUN:-}" ]; then
      case " $(stat -c %U "$dir" 2>/dev/null) " in " alice "|" bob ") ;; *) continue ;; esac
      { tr '\0' '\n' < "$dir/environ"; } 2>/dev/null | grep -qxF "CLUSTERMGR_TEST_RUN=$CLUSTERMGR_TEST_RUN" && echo "$pid"
    fi
  done
}

hub=$(cat "$STATE/hub.pid" 2>/dev/null || true)
if [ -n "$hub" ] && live "$hub" && grep -q jupyterhub "/proc/$hub/cmdline" 2>/dev/null; then
  kill -TERM "$hub"
  wait_gone 60 "$hub" || { log "jupyterhub $hub did not stop within 60 s: SIGKILL"; kill -KILL "$hub" 2>/dev/null; }
fi
# A clean hub stop leaves nothing; what is left after a crash is stopped here, by PID.
left=$(ours)
if [ -n "$left" ]; then
  log "stopping what the hub left: $(echo $left)"
  kill -TERM $left 2>/dev/null
  wait_gone 15 $left || { kill -KILL $left 2>/dev/null; wait_gone 5 $left; }
fi

# Folders opened for the users get their mode back.
if [ -s "$STATE/opened-folders" ]; then
  while read -r folder; do [ -d "$folder" ] && chmod o-x "$folder" && log "o-x on $folder again"; done < "$STATE/opened-folders"
  : > "$STATE/opened-folders"
fi

# Users this run created go, with their homes, once nothing of theirs runs.
if [ -s "$STATE/created-users" ]; then
  removed=0
  while read -r user; do
    # Their processes may still be exiting (the hub has just stopped their servers): wait for them, then
    # stop what of theirs belongs to this run; only processes of another run keep the user.
    user_gone() { ! pgrep -u "$user" > /dev/null 2>&1; }
    waited=0
    until user_gone || [ $waited -ge 150 ]; do sleep 0.2; waited=$((waited + 1)); done
    if ! user_gone && [ -n "${CLUSTERMGR_TEST_RUN:-}" ]; then
      mine=""
      for pid in $(pgrep -u "$user"); do
        { tr '\0' '\n' < "/proc/$pid/environ"; } 2>/dev/null | grep -qxF "CLUSTERMGR_TEST_RUN=$CLUSTERMGR_TEST_RUN" && mine="$mine $pid"
      done
      if [ -n "$mine" ]; then
        log "stopping what user $user still runs for this run:$mine"
        kill -TERM $mine 2>/dev/null; wait_gone 10 $mine || { kill -KILL $mine 2>/dev/null; wait_gone 5 $mine; }
      fi
    fi
    if ! user_gone; then
      log "user $user still has processes 30 s after the hub stopped (another run?): left in place"
      status=1
      continue
    fi
    userdel --remove "$user" 2>/dev/null || userdel "$user" || status=1
    removed=$((removed + 1))
    log "removed user $user"
  done < "$STATE/created-users"
  : > "$STATE/created-users"
  if ! getent passwd alice > /dev/null && ! getent passwd bob > /dev/null; then rm -rf "$SECRETS"; fi
fi
exit $status
