#!/usr/bin/env bash
# stop-slurm.sh - stop the single-node SLURM started by ci/slurm/start-slurm.sh.
# Cancels all jobs, shuts down slurmctld/slurmd, and stops munged if
# start-slurm.sh started it. Safe to call when nothing is running.
#   --keep-munge   leave munged running
#   --purge        also delete the state/log dir
# Environment: SLURM_CI_STATE (default /tmp/slurm-ci), as for start-slurm.sh.
set -uo pipefail

STATE="${SLURM_CI_STATE:-/tmp/slurm-ci}"
KEEP_MUNGE=0; PURGE=0
for a in "$@"; do
  case "$a" in
    --keep-munge) KEEP_MUNGE=1 ;;
    --purge) PURGE=1 ;;
    *) echo "usage: $0 [--keep-munge] [--purge]" >&2; exit 2 ;;
  esac
done

log() { echo "[stop-slurm] $*"; }
alive() {  # alive PID: process exists and is not a zombie
  local st
  st=$(sed 's/.*) //' /proc/"$1"/stat 2>/dev/null | cut -c1) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}
pid_of() {  # pid_of PIDFILE NAME -> pid if that process is alive and named NAME
  local pid
  [ -r "$1" ] || return 1
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && alive "$pid" && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = "$2" ] && echo "$pid"
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

ctld=$(pid_of "$STATE/slurmctld.pid" slurmctld || true)
slurmd=$(pid_of "$STATE/slurmd.pid" slurmd || true)

if [ -n "$ctld" ]; then
  jobs=$(squeue -h -o %i 2>/dev/null | tr '\n' ' ')
  if [ -n "${jobs// /}" ]; then
    log "cancelling jobs: $jobs"
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null || true
    for _ in $(seq 60); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.25; done
  fi
  scontrol shutdown > /dev/null 2>&1 || true     # stops slurmctld and slurmd
fi

pids=""; [ -n "$ctld" ] && pids="$ctld"; [ -n "$slurmd" ] && pids="$pids $slurmd"
if [ -n "${pids// /}" ]; then
  # shellcheck disable=SC2086
  if ! wait_gone 15 $pids; then
    log "daemons still up after 15s; sending SIGTERM"
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null
    # shellcheck disable=SC2086
    wait_gone 10 $pids || kill -KILL $pids 2>/dev/null
  fi
  log "slurmctld/slurmd stopped"
else
  log "slurmctld/slurmd not running"
fi

if [ $KEEP_MUNGE = 0 ] && [ -e "$STATE/munged.ours" ]; then
  m=$(pid_of /run/munge/munged.pid munged || true)
  if [ -n "$m" ]; then
    kill -TERM "$m"; wait_gone 10 "$m" || kill -KILL "$m" 2>/dev/null
    log "munged stopped"
  fi
  rm -f "$STATE/munged.ours"
fi

if [ $PURGE = 1 ]; then rm -rf "$STATE"; log "removed $STATE"; fi
exit 0
