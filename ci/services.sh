#!/usr/bin/env bash
# services.sh - the services a test run needs (single-node SLURM, single-node Grid Engine, the multi-host
# test bed of ci/testbed/: two namespace nodes with a SLURM of their own and an sshd): start them,
# and at the end stop exactly those this run started.
#
#   ci/services.sh start RUN_DIR   start what is not running; write the names of those it started to RUN_DIR/started
#   ci/services.sh stop RUN_DIR    stop the services named in RUN_DIR/started (ci/check-leftovers.sh then checks they are gone)
#
# The rule: a run stops only what it started. A developer's SLURM or Grid Engine that was running
# before `make test` is used and left running; on a fresh machine (CI) both are started and both are
# stopped at the end, pass or fail (the Makefile calls `stop` from a trap). KEEP_SERVICES=1 keeps even
# what this run started (e.g. to run `make test` several times without the start-up cost).
# With CLUSTERMGR_HUB=1 (make test, make ui-test) it also starts a JupyterHub with two system users for the
# two-user test (ci/hub/start-hub.sh): one per run, always stopped at the end, KEEP_SERVICES or not.
# Needs root for starting and stopping (the Makefile runs it with sudo when not root).
set -uo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
log() { echo "[services] $*"; }
usage() { echo "usage: $0 start|stop RUN_DIR" >&2; exit 2; }
[ $# = 2 ] || usage
ACTION=$1 RUN_DIR=$2
STARTED="$RUN_DIR/started"
mkdir -p "$RUN_DIR"
touch "$STARTED"

slurm_up() {
  local state="${SLURM_CI_STATE:-/tmp/slurm-ci}" pid
  pid=$(cat "$state/slurmctld.pid" 2>/dev/null) && [ -n "$pid" ] && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = slurmctld ]
}
testbed_up() {
  local state="${TESTBED_STATE:-/tmp/clustermgr-testbed}" pid
  pid=$(cat "$state/slurmctld.pid" 2>/dev/null) && [ -n "$pid" ] && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = slurmctld ]
}
gridengine_up() { pgrep -x sge_qmaster > /dev/null || pgrep -x sge_execd > /dev/null; }

case "$ACTION" in
  start)
    set -e
    if slurm_up; then log "SLURM was running: used, and left running"; else echo slurm >> "$STARTED"; fi
    if ! { munge -n 2>/dev/null | unmunge > /dev/null 2>&1; }; then echo munge >> "$STARTED"; fi  # start-slurm.sh starts it
    # Recorded before starting: a start that fails half-way is still stopped at the end.
    bash "$HERE/slurm/start-slurm.sh"
    if gridengine_up; then log "Grid Engine was running: used, and left running"; else echo gridengine >> "$STARTED"; fi
    bash "$HERE/gridengine/start-gridengine.sh"
    if testbed_up; then log "the multi-host test bed was up: used, and left up"; else echo testbed >> "$STARTED"; fi
    bash "$HERE/testbed/start-testbed.sh"
    if [ "${CLUSTERMGR_HUB:-0}" = 1 ]; then bash "$HERE/hub/start-hub.sh" "$RUN_DIR"; fi  # its state: RUN_DIR/hub
    ;;
  stop)
    hub_status=0
    bash "$HERE/hub/stop-hub.sh" "$RUN_DIR" || hub_status=1  # per run, never kept; nothing to do without RUN_DIR/hub
    if [ "${KEEP_SERVICES:-0}" = 1 ]; then
      [ -s "$STARTED" ] && log "KEEP_SERVICES=1: leaving running what this run started: $(tr '\n' ' ' < "$STARTED")"
      exit $hub_status
    fi
    status=$hub_status
    if grep -qx testbed "$STARTED"; then bash "$HERE/testbed/stop-testbed.sh" || status=1; fi
    if grep -qx gridengine "$STARTED"; then bash "$HERE/gridengine/stop-gridengine.sh" || status=1; fi
    if grep -qx slurm "$STARTED"; then bash "$HERE/slurm/stop-slurm.sh" || status=1; fi
    exit $status
    ;;
  *) usage ;;
esac
