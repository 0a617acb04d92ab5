#!/usr/bin/env bash
# Install Debian's Slurm (22.05 on Debian 12) and munge for the single-node test cluster,
# plus slurmdbd + MariaDB for job accounting (sacct, submitit's job.state), only when missing.
#
#   slurm/testcluster/install.sh            # quiet; prints nothing when everything is there
#
# Environment:
#   SLURM_TESTCLUSTER_ACCOUNTING=0   skip slurmdbd + mariadb-server (sacct will not work)
#
# Exit status: as tools/apt-ensure.sh (0 ok, 75 archive unreachable, 77 not root, 1 other).
set -euo pipefail

pkgs=(slurmctld slurmd slurm-client munge)
if [[ "${SLURM_TESTCLUSTER_ACCOUNTING:-1}" != 0 ]]; then
  pkgs+=(slurmdbd mariadb-server)
fi
exec "$(dirname "$0")/../../tools/apt-ensure.sh" "${pkgs[@]}"
