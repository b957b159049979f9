#!/usr/bin/env bash
# stop-testbed.sh - stop what ci/testbed/start-testbed.sh started: the bed's jobs, slurmd (and everything
# else running in the node namespaces), slurmctld, sshd, then the veths, namespaces and bridge, and munged
# if the bed started it. Safe to call when nothing runs. The single-node SLURM of ci/slurm/ is not touched.
#   --daemons-only   stop the bed's SLURM daemons only (start-testbed.sh uses it when slurm.conf changed)
# Environment: TESTBED_STATE (default /tmp/clustermgr-testbed).
set -uo pipefail

STATE="${TESTBED_STATE:-/tmp/clustermgr-testbed}"
CONF="$STATE/slurm.conf"
NODES=(node1 node2)
DAEMONS_ONLY=0
[ "${1:-}" = --daemons-only ] && DAEMONS_ONLY=1
export SLURM_CONF="$CONF"

log() { echo "[testbed] $*"; }
alive() { local st; st=$(sed 's/.*) //' /proc/"$1"/stat 2>/dev/null | cut -c1) || return 1; [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]; }
pid_of() { local pid; pid=$(cat "$1" 2>/dev/null) || return 1; [ -n "$pid" ] && alive "$pid" && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = "$2" ] && echo "$pid"; }
stop_pids() {  # stop_pids PID...: TERM, up to 10 s, then KILL
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null
  local end=$((SECONDS + 10)) p any
  while [ $SECONDS -lt $end ]; do
    any=0; for p in "$@"; do alive "$p" && any=1; done
    [ $any = 0 ] && return 0
    sleep 0.2
  done
  kill -KILL "$@" 2>/dev/null
}

ctld=$(pid_of "$STATE/slurmctld.pid" slurmctld || true)
if [ -n "$ctld" ] && [ -f "$CONF" ]; then
  jobs=$(timeout 10 squeue -h -o %i 2>/dev/null | tr '\n' ' ')
  if [ -n "${jobs// /}" ]; then
    log "cancelling the bed's jobs: $jobs"
    # shellcheck disable=SC2086
    timeout 10 scancel $jobs 2>/dev/null
  fi
fi
# Everything in a node namespace is the bed's: slurmd, slurmstepd, job processes, sshd and its sessions.
for n in "${NODES[@]}"; do
  ip netns list 2>/dev/null | grep -qw "^$n" || continue
  # shellcheck disable=SC2046
  stop_pids $(ip netns pids "$n" 2>/dev/null)
done
[ -n "$ctld" ] && stop_pids "$ctld"
rm -f "$STATE"/slurmctld.pid "$STATE"/slurmd-*.pid "$STATE/ssh/sshd.pid"
[ $DAEMONS_ONLY = 1 ] && exit 0

for n in "${NODES[@]}"; do
  ip link del "cm-v${n#node}" 2>/dev/null
  if [ -e "$STATE/netns-$n.ours" ]; then ip netns del "$n" 2>/dev/null; rm -f "$STATE/netns-$n.ours"; fi
done
if [ -e "$STATE/bridge.ours" ]; then ip link del cm-br0 2>/dev/null; rm -f "$STATE/bridge.ours"; fi
if [ -e "$STATE/munged.ours" ]; then
  m=$(pid_of /run/munge/munged.pid munged || true)
  [ -n "$m" ] && stop_pids "$m"
  rm -f "$STATE/munged.ours"
fi
log "test bed stopped"
exit 0
