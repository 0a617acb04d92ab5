#!/usr/bin/env bash
# Install Debian's Slurm (22.05 on Debian 12) and munge for the single-node test cluster,
# plus slurmdbd + MariaDB for job accounting (sacct, submitit's job.state), only when missing.
#
#   slurm/testcluster/install.sh            # quiet; prints nothing when everything is there
#
# Environment:
#   SLURM_TESTCLUSTER_ACCOUNTING=0   skip slurmdbd + mariadb-server (sacct will not work)
#
# Exit status: 0 installed (or already there), 75 the package archive could not be reached,
# 77 not root and no password-less sudo, 1 anything else. The apt log is printed on failure.
set -euo pipefail

pkgs=(slurmctld slurmd slurm-client munge)
if [[ "${SLURM_TESTCLUSTER_ACCOUNTING:-1}" != 0 ]]; then
  pkgs+=(slurmdbd mariadb-server)
fi

# (no `| grep -q`: with pipefail, grep quitting early can fail the pipeline)
installed() { [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == *" ok installed" ]]; }
has_candidate() { [[ "$(apt-cache policy "$1" 2>/dev/null)" == *"Candidate: "[0-9]* ]]; }

missing=()
for p in "${pkgs[@]}"; do
  installed "$p" || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

SUDO=()
if [[ "$(id -u)" != 0 ]]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    echo "install.sh: need root (or password-less sudo) to install: ${missing[*]}" >&2
    exit 77
  fi
fi

log=$(mktemp -t slurm-testcluster-apt.XXXXXX)
policy=/usr/sbin/policy-rc.d
made_policy=0
cleanup() {
  if ((made_policy)); then "${SUDO[@]}" rm -f "$policy"; fi
  rm -f "$log"
}
trap cleanup EXIT

# The packages' maintainer scripts would start system-wide munged/slurmctld/slurmd/mariadb
# (through their init scripts); our cluster runs private daemons instead, so forbid that.
if [[ ! -e "$policy" ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$policy" >/dev/null
  "${SUDO[@]}" chmod 755 "$policy"
  made_policy=1
fi

apt=("${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -y
     -o Dpkg::Use-Pty=0 -o DPkg::Lock::Timeout=300)

unreachable() {
  grep -Eq 'Could not resolve|Failed to fetch|Temporary failure|Unable to connect|Connection (failed|refused|timed out)|Network is unreachable|No route to host' "$log"
}

do_update() {
  if ! "${apt[@]}" update >>"$log" 2>&1; then
    cat "$log" >&2
    unreachable && exit 75
    exit 1
  fi
  # apt-get update exits 0 even when every source failed; a candidate must exist now
  for p in "${missing[@]}"; do
    if ! has_candidate "$p"; then
      cat "$log" >&2
      echo "install.sh: no installable candidate for $p after apt-get update" >&2
      unreachable && exit 75
      exit 1
    fi
  done
}

# apt-get update only when the package lists do not know a package yet ...
for p in "${missing[@]}"; do
  if ! has_candidate "$p"; then
    do_update
    break
  fi
done

install() { "${apt[@]}" install --no-install-recommends "${missing[@]}" >>"$log" 2>&1; }
if ! install; then
  # ... or when the lists are stale (a version that the archive no longer has: 404)
  do_update
  if ! install; then
    cat "$log" >&2
    unreachable && exit 75
    exit 1
  fi
fi
