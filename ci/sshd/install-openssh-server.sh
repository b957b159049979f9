#!/usr/bin/env bash
# Installs Debian's openssh-server for tests/test_ssh.py, when /usr/sbin/sshd is missing.
#
# The tests run a private sshd of their own (127.0.0.1, a free port, keys and config in a temporary
# folder); this script only puts the binary there. The package's postinst is kept from starting
# the system's ssh service (policy-rc.d, as ci/slurm/start-slurm.sh does). Needs root and apt-get.
set -euo pipefail

[ -x /usr/sbin/sshd ] && command -v ssh-keygen > /dev/null && exit 0
command -v apt-get > /dev/null || { echo "openssh-server is missing and there is no apt-get" >&2; exit 1; }
echo "installing Debian openssh-server (the tests start a private sshd; the system's is not started)"
export DEBIAN_FRONTEND=noninteractive
added_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
  added_policy=1
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt_install() { apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends openssh-server openssh-client; }
apt_install || { apt-get update -q -o DPkg::Lock::Timeout=600 && apt_install; }
