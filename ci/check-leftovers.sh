#!/usr/bin/env bash
# check-leftovers.sh - a test run leaves nothing behind: fail if anything it started still runs.
#
#   ci/check-leftovers.sh snapshot RUN_DIR   at the start of a run: note the network namespaces, users, homes
#   ci/check-leftovers.sh check RUN_DIR      at its end: list what the run left behind; exit 1 if anything
#
# What "the run started" means, so that other people's processes on a shared machine never count:
#   - processes working in a folder below RUN_DIR (pytest's --basetemp and the UI tests' cluster folders are
#     there): schedulers and workers that set their process title (setproctitle) overwrite the environment
#     that /proc/PID/environ shows, so their id cannot be read; their working folder can;
#   - processes whose environment carries CLUSTERMGR_TEST_RUN=<this run's id> (the Makefile exports it;
#     every Jupyter server, launcher, scheduler, worker, sshd, browser and SLURM job of the run inherits it),
#     other than this script and the shells that called it;
#   - the daemons of the services that ci/services.sh started for this run (RUN_DIR/started: slurmctld,
#     slurmd, slurmstepd; munged; sge_qmaster, sge_execd, sge_shepherd), unless KEEP_SERVICES=1 kept them;
#   - SLURM jobs whose script lies below RUN_DIR (pytest's --basetemp is RUN_DIR/pytest);
#   - network namespaces, and the test bed's links (cm-*: bridge and veths), that did not exist at the snapshot;
#   - users and folders under /home that did not exist at the snapshot (the hub test's alice and bob): users with a
#     login user's uid (UID_MIN to UID_MAX of /etc/login.defs: 1000 to 60000) or the hub's mark; system users that
#     a package the run installed created (Grid Engine's sgeadmin and exim's Debian-exim below 1000, SLURM's slurm
#     at 64030, in Debian's range of fixed package uids) belong to that installed software, not to the run;
#   - the test bed's daemons (their pid files in $TESTBED_STATE) when this run started the bed (RUN_DIR/started).
# Things that are still stopping get LEFTOVER_GRACE seconds (default 15) to go before they count.
set -uo pipefail

usage() { echo "usage: $0 snapshot|check RUN_DIR" >&2; exit 2; }
[ $# = 2 ] || usage
ACTION=$1 RUN_DIR=$2
RUN_ID="${CLUSTERMGR_TEST_RUN:-}"
GRACE="${LEFTOVER_GRACE:-15}"
DAEMONS_OF_slurm="slurmctld slurmd slurmstepd"
DAEMONS_OF_munge="munged"
DAEMONS_OF_gridengine="sge_qmaster sge_execd sge_shepherd"
ALL_DAEMONS="$DAEMONS_OF_slurm $DAEMONS_OF_munge $DAEMONS_OF_gridengine"

netns() { ip netns list 2>/dev/null | awk '{ print $1 }' | sort; }
testbed_links() { ip -o link show 2>/dev/null | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | { grep '^cm-' || true; } | sort; }
TESTBED_STATE="${TESTBED_STATE:-/tmp/clustermgr-testbed}"
users() { getent passwd | cut -d: -f1 | sort; }
TEST_USER_MARK="clustermgr-lab test user"  # ci/hub/start-hub.sh's --comment
login_defs() {  # login_defs KEY DEFAULT: a value of /etc/login.defs
  local value
  value=$(awk -v key="$1" '$1 == key { print $2 }' /etc/login.defs 2>/dev/null | tail -n 1)
  echo "${value:-$2}"
}
UID_MIN=$(login_defs UID_MIN 1000) UID_MAX=$(login_defs UID_MAX 60000)
made_by_run() {  # made_by_run NAME: a login user (a uid in UID_MIN..UID_MAX) or one the hub marked, not a package's
  local entry uid gecos
  entry=$(getent passwd "$1") || return 1
  uid=$(echo "$entry" | cut -d: -f3) gecos=$(echo "$entry" | cut -d: -f5)
  { [ "$uid" -ge "$UID_MIN" ] && [ "$uid" -le "$UID_MAX" ]; } || [ "$gecos" = "$TEST_USER_MARK" ]
}
homes() { find /home -mindepth 1 -maxdepth 1 2>/dev/null | sort; }

parent() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $2 }'; }
# This script and the shells that called it (they carry the run's id too); subshells of this script are below $$.
SELF=" "
pid=$$
while [ -n "$pid" ] && [ "$pid" != 0 ]; do SELF+="$pid "; pid=$(parent "$pid"); done
ours_or_caller() {  # ours_or_caller PID: this script, one of its callers, or a process below this script
  local pid=$1
  case "$SELF" in *" $pid "*) return 0 ;; esac
  while [ -n "$pid" ] && [ "$pid" != 0 ] && [ "$pid" != 1 ]; do
    [ "$pid" = $$ ] && return 0
    pid=$(parent "$pid")
  done
  return 1
}

describe() { echo "  pid $1 ($(cat "/proc/$1/comm" 2>/dev/null)): $(tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null | cut -c1-200)"; }

live() {  # live PID: exists and is not a zombie
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

leftovers() {  # prints one line per leftover
  local pid comm name service
  local cwd
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    cwd=$(readlink "$dir/cwd" 2>/dev/null) || continue
    case "$cwd" in "$RUN_DIR"/*) ;; *) continue ;; esac
    live "$pid" && ! ours_or_caller "$pid" && echo "$(describe "$pid") [working in $cwd]"
  done
  if [ -n "$RUN_ID" ]; then
    for dir in /proc/[0-9]*; do
      pid=${dir#/proc/}
      case "$(readlink "$dir/cwd" 2>/dev/null)" in "$RUN_DIR"/*) continue ;; esac  # listed above
      { tr '\0' '\n' < "$dir/environ"; } 2>/dev/null | grep -qxF "CLUSTERMGR_TEST_RUN=$RUN_ID" || continue
      comm=$(cat "$dir/comm" 2>/dev/null) || continue
      case " $ALL_DAEMONS " in *" $comm "*) continue ;; esac  # counted below, by service
      live "$pid" && ! ours_or_caller "$pid" && describe "$pid"
    done
  fi
  if [ "${KEEP_SERVICES:-0}" != 1 ] && [ -s "$RUN_DIR/started" ]; then
    while read -r service; do
      [ -n "$service" ] || continue
      if [ "$service" = testbed ]; then  # its slurmctld/slurmd share their names with the single-node SLURM's
        for file in "$TESTBED_STATE"/slurmctld.pid "$TESTBED_STATE"/slurmd-*.pid "$TESTBED_STATE"/ssh/sshd.pid; do
          pid=$(cat "$file" 2>/dev/null) || continue
          [ -n "$pid" ] && live "$pid" && echo "$(describe "$pid") [daemon of the test bed, which this run started]"
        done
        continue
      fi
      eval "names=\$DAEMONS_OF_$service"
      for name in $names; do
        for pid in $(pgrep -x "$name"); do
          live "$pid" && echo "$(describe "$pid") [daemon of $service, which this run started]"
        done
      done
    done < "$RUN_DIR/started"
  fi
  if command -v squeue > /dev/null; then
    timeout 30 squeue -h -o '%i|%j|%T|%o' 2>/dev/null | while IFS='|' read -r id name state command; do
      case "$command" in "$RUN_DIR"/*) echo "  SLURM job $id ($name, $state): $command" ;; esac
    done
    if [ -f "$TESTBED_STATE/slurm.conf" ] && [ -f "$TESTBED_STATE/slurmctld.pid" ]; then  # the test bed's own SLURM
      SLURM_CONF="$TESTBED_STATE/slurm.conf" timeout 30 squeue -h -o '%i|%j|%T|%o' 2>/dev/null |
        while IFS='|' read -r id name state command; do
          case "$command" in "$RUN_DIR"/*) echo "  test bed SLURM job $id ($name, $state): $command" ;; esac
        done
    fi
  fi
  if [ -f "$RUN_DIR/netns.before" ]; then
    comm -13 "$RUN_DIR/netns.before" <(netns) | sed 's/^/  network namespace /'
  fi
  if [ -f "$RUN_DIR/links.before" ]; then
    comm -13 "$RUN_DIR/links.before" <(testbed_links) | sed 's/^/  network link /'
  fi
  if [ -f "$RUN_DIR/users.before" ]; then
    comm -13 "$RUN_DIR/users.before" <(users) | while read -r name; do
      if made_by_run "$name"; then echo "  system user $name"; fi
    done
  fi
  if [ -f "$RUN_DIR/homes.before" ]; then
    comm -13 "$RUN_DIR/homes.before" <(homes) | sed 's/^/  home folder /'
  fi
}

case "$ACTION" in
  snapshot)
    mkdir -p "$RUN_DIR"
    netns > "$RUN_DIR/netns.before"
    testbed_links > "$RUN_DIR/links.before"
    users > "$RUN_DIR/users.before"
    homes > "$RUN_DIR/homes.before"
    ;;
  check)
    [ -n "$RUN_ID" ] || echo "[check-leftovers] CLUSTERMGR_TEST_RUN is not set: processes are not checked" >&2
    deadline=$((SECONDS + GRACE))
    while :; do
      found=$(leftovers)
      [ -z "$found" ] && { echo "[check-leftovers] nothing left behind"; exit 0; }
      [ $SECONDS -ge "$deadline" ] && break
      sleep 0.5
    done
    echo "[check-leftovers] the test run left these behind (still there ${GRACE} s after it ended):" >&2
    echo "$found" >&2
    exit 1
    ;;
  *) usage ;;
esac
