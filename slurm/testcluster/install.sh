#!/usr/bin/env bash
# Install Debian's Slurm (22.05 on Debian 12) and munge for the single-node test cluster,
# plus slurmdbd + MariaDB for job accounting (sacct, submitit's job.state), and iptables for the firewall test,
# only when missing.
#
#   slurm/testcluster/install.sh            # quiet; prints nothing when everything is there
#
# Environment:
#   SLURM_TESTCLUSTER_ACCOUNTING=0   skip slurmdbd + mariadb-server (sacct will not work)
#
# Exit status: as tools/apt-ensure.sh (0 ok, 75 archive unreachable, 77 not root, 1 other).
set -euo pipefail

# iptables: tests/test_firewall.py gives the two-node cluster a firewall that drops forwarded packets
pkgs=(slurmctld slurmd slurm-client munge iptables)
if [[ "${SLURM_TESTCLUSTER_ACCOUNTING:-1}" != 0 ]]; then
  pkgs+=(slurmdbd mariadb-server)
fi
exec "$(dirname "$0")/../../tools/apt-ensure.sh" "${pkgs[@]}"
