#!/usr/bin/env bash
# stop-gridengine.sh - stop the single-node Grid Engine that ci/gridengine/start-gridengine.sh started:
# deletes every job, then stops sge_execd and sge_qmaster (their init scripts; SIGTERM, then SIGKILL,
# if they do not go). Safe to call when nothing is running. Leaves the packages and the cell
# configured, so start-gridengine.sh starts it again in a few seconds.
#   --purge   also delete the state dir of start-gridengine.sh
# Environment: SGE_CI_STATE (default /tmp/sge-ci), as for start-gridengine.sh.
set -uo pipefail

STATE="${SGE_CI_STATE:-/tmp/sge-ci}"
export SGE_ROOT=/var/lib/gridengine SGE_CELL=default
PURGE=0
for a in "$@"; do
  case "$a" in
    --purge) PURGE=1 ;;
    *) echo "usage: $0 [--purge]" >&2; exit 2 ;;
  esac
done

log() { echo "[stop-gridengine] $*"; }
[ "$(id -u)" = 0 ] || { echo "[stop-gridengine] ERROR: must run as root (e.g. sudo bash $0)" >&2; exit 1; }
alive() {  # alive PID: process exists and is not a zombie
  local st
  st=$(sed 's/.*) //' /proc/"$1"/stat 2>/dev/null | cut -c1) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}
wait_gone() {  # wait_gone SECONDS PID...
  local end=$((SECONDS + $1)); shift
  while [ $SECONDS -lt $end ]; do
    local any=0
    for p in "$@"; do alive "$p" && any=1; done
    [ $any = 0 ] && return 0
    sleep 0.2
  done
  return 1
}
daemon_pids() { pgrep -x "$1" | tr '\n' ' '; }

if command -v qstat > /dev/null && timeout 10 qstat -u '*' > /dev/null 2>&1; then
  jobs=$(timeout 10 qstat -u '*' 2>/dev/null | awk 'NR > 2 { print $1 }' | tr '\n' ' ')
  if [ -n "${jobs// /}" ]; then
    log "deleting jobs: $jobs"
    # shellcheck disable=SC2086
    timeout 30 qdel -f $jobs > /dev/null 2>&1 || true
    for _ in $(seq 60); do [ -z "$(timeout 10 qstat -u '*' 2>/dev/null)" ] && break; sleep 0.25; done
  fi
fi

stop_daemon() {  # stop_daemon NAME INIT-SCRIPT
  local pids
  pids=$(daemon_pids "$1")
  if [ -z "${pids// /}" ]; then
    log "$1 not running"
    return 0
  fi
  [ -x "$2" ] && timeout 60 "$2" stop > /dev/null 2>&1
  # shellcheck disable=SC2086
  if ! wait_gone 15 $pids; then
    log "$1 still up after its init script; sending SIGTERM"
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null
    # shellcheck disable=SC2086
    wait_gone 10 $pids || kill -KILL $pids 2>/dev/null
  fi
  log "$1 stopped"
}

# The execution daemon first: the master's shutdown would leave it waiting for a master.
stop_daemon sge_execd /etc/init.d/gridengine-exec
stop_daemon sge_qmaster /etc/init.d/gridengine-master

if [ $PURGE = 1 ]; then rm -rf "$STATE"; log "removed $STATE"; fi
exit 0
