#!/usr/bin/env bash
# start-gridengine.sh - install (if missing) and start a single-node Grid Engine on this machine,
# for clustermgr-lab's tests (tests/test_hpc.py, the `sge` backend) and CI. Idempotent.
#
# Needs root and Debian 12 apt (gridengine-master, gridengine-exec, gridengine-client 8.1.9).
# Unattended: debconf answers are preseeded (the package then creates the cell itself), and the
# daemons are started by their init scripts (no systemd needed). What the packages do not do:
#   - host_aliases: 127.0.0.1 resolves to "localhost" while the host calls itself $(hostname);
#     Grid Engine refuses such clients ("access denied") unless both names are one host.
#   - min_uid/min_gid 0: CI runs as root, and Grid Engine refuses jobs of uid < 1000 by default.
#   - a queue all.q with 2 slots on this host and no load threshold (a busy CI box would otherwise
#     put it in alarm state), and a 1 s scheduling interval (default 15 s).
# Prints "Grid Engine ready" when a queue instance is usable; exits 1 otherwise.
set -euo pipefail

STATE="${SGE_CI_STATE:-/tmp/sge-ci}"
export SGE_ROOT=/var/lib/gridengine SGE_CELL=default
COMMON="$SGE_ROOT/$SGE_CELL/common"
PKGS=(gridengine-master gridengine-exec gridengine-client)
log() { echo "[start-gridengine] $*"; }
die() { echo "[start-gridengine] ERROR: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (e.g. sudo bash $0)"
T_START=$SECONDS
mkdir -p "$STATE"

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} ..."
  debconf-set-selections <<SEL
gridengine-common gridengine/gridenginemaster string localhost
gridengine-common gridengine/gridenginecell string default
gridengine-common gridengine/gridengineconfig boolean true
gridengine-master gridengine/gridenginemaster string localhost
gridengine-master gridengine/gridenginecell string default
gridengine-master gridengine/gridengineconfig boolean true
gridengine-client gridengine/gridenginemaster string localhost
gridengine-exec gridengine/gridenginemaster string localhost
SEL
  export DEBIAN_FRONTEND=noninteractive
  # Keep the packages' postinst from starting the daemons before host_aliases exists.
  added_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
    added_policy=1
  fi
  trap '[ $added_policy = 1 ] && rm -f /usr/sbin/policy-rc.d' EXIT
  install() { apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}"; }
  if ! install > "$STATE/apt.log" 2>&1; then
    apt-get update -q -o DPkg::Lock::Timeout=600 >> "$STATE/apt.log" 2>&1
    install >> "$STATE/apt.log" 2>&1 || { tail -20 "$STATE/apt.log"; die "apt-get install failed"; }
  fi
  [ $added_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
  added_policy=0
  log "installed in $((SECONDS - T_START))s"
fi
[ -d "$COMMON" ] || die "the package did not create the cell $COMMON; see $STATE/apt.log"

# One host, whatever name a client uses for it.
names="localhost $(hostname -s) $(hostname)"
names+=" $(awk '$1 == "127.0.0.1" { for (i = 2; i <= NF; i++) print $i }' /etc/hosts | tr '\n' ' ')"
echo "$(tr ' ' '\n' <<< "$names" | awk 'NF && !seen[$0]++' | tr '\n' ' ')" > "$COMMON/host_aliases"
echo localhost > "$COMMON/act_qmaster"

qmaster_up() { timeout 10 qstat -u '*' > /dev/null 2>&1; }
if ! qmaster_up; then
  # A qmaster that runs but does not answer started before host_aliases: restart it.
  if pgrep -x sge_qmaster > /dev/null; then /etc/init.d/gridengine-master stop > "$STATE/master.log" 2>&1 || true; fi
  /etc/init.d/gridengine-master start >> "$STATE/master.log" 2>&1 || true
  for _ in $(seq 100); do qmaster_up && break; sleep 0.2; done
  qmaster_up || { cat "$STATE/master.log" >&2; die "sge_qmaster does not answer"; }
  log "sge_qmaster started"
fi

# Editors for qconf -m...: Grid Engine edits its configuration only through $EDITOR.
cat > "$STATE/conf-editor" <<'ED'
#!/bin/sh
sed -i -e 's/^min_uid .*/min_uid 0/' -e 's/^min_gid .*/min_gid 0/' "$1"
ED
cat > "$STATE/sched-editor" <<'ED'
#!/bin/sh
sed -i -e 's/^schedule_interval .*/schedule_interval 0:0:1/' -e 's/^job_load_adjustments .*/job_load_adjustments NONE/' "$1"
ED
chmod +x "$STATE/conf-editor" "$STATE/sched-editor"
qconf -sconf | grep -q '^min_uid  *0$' || EDITOR="$STATE/conf-editor" qconf -mconf > /dev/null
qconf -ssconf | grep -q '^schedule_interval  *0:0:1$' || EDITOR="$STATE/sched-editor" qconf -msconf > /dev/null
qconf -ss 2>/dev/null | grep -qx localhost || qconf -as localhost > /dev/null

if ! pgrep -x sge_execd > /dev/null; then
  /etc/init.d/gridengine-exec start > "$STATE/exec.log" 2>&1 || true
  log "sge_execd started"
fi
for _ in $(seq 100); do qhost 2>/dev/null | grep -q '^localhost .*lx-' && break; sleep 0.2; done

if ! qconf -sql 2>/dev/null | grep -qx all.q; then
  cat > "$STATE/all.q" <<Q
qname all.q
hostlist localhost
seq_no 0
load_thresholds NONE
suspend_thresholds NONE
nsuspend 1
suspend_interval 00:05:00
priority 0
min_cpu_interval 00:05:00
processors UNDEFINED
qtype BATCH INTERACTIVE
ckpt_list NONE
pe_list make
rerun FALSE
slots $(nproc)
tmpdir /tmp
shell /bin/sh
prolog NONE
epilog NONE
shell_start_mode unix_behavior
starter_method NONE
suspend_method NONE
resume_method NONE
terminate_method NONE
notify 00:00:60
owner_list NONE
user_lists NONE
xuser_lists NONE
subordinate_list NONE
complex_values NONE
projects NONE
xprojects NONE
calendar NONE
initial_state default
s_rt INFINITY
h_rt INFINITY
s_cpu INFINITY
h_cpu INFINITY
s_fsize INFINITY
h_fsize INFINITY
s_data INFINITY
h_data INFINITY
s_stack INFINITY
h_stack INFINITY
s_core INFINITY
h_core INFINITY
s_rss INFINITY
h_rss INFINITY
s_vmem INFINITY
h_vmem INFINITY
Q
  qconf -Aq "$STATE/all.q" > /dev/null
  log "queue all.q added"
fi
qmod -c 'all.q' > /dev/null 2>&1 || true   # clear an error state left by an earlier run

for _ in $(seq 100); do
  qstat -f -q all.q 2>/dev/null | grep -E '^all.q@\S+ +B' | grep -vqE ' (a|u|E|d|au|adu)$' && break
  sleep 0.2
done
qstat -f -q all.q | grep -E '^all.q@' | grep -vqE ' (a|u|E|d|au|adu)$' || { qstat -f >&2; die "queue all.q is not usable"; }
log "Grid Engine ready in $((SECONDS - T_START))s: $(qstat -f -q all.q | grep '^all.q@')"
