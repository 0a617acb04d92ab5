#!/usr/bin/env bash
# Install Debian packages only when missing, without starting the services they bring: the suite runs its own
# private daemons (a test Slurm cluster, nginx per cell), so the packages' init scripts are forbidden
# (policy-rc.d) while installing. Quiet: prints nothing when everything is there.
#
#   tools/apt-ensure.sh PACKAGE...
#
# Exit status: 0 installed (or already there), 75 the package archive could not be reached, 77 not root and
# no password-less sudo, 1 anything else. The apt log is printed on failure.
set -euo pipefail
me=$(basename "$0")
(($# > 0)) || { echo "usage: $me PACKAGE..." >&2; exit 1; }

# (no `| grep -q`: with pipefail, grep quitting early can fail the pipeline)
installed() { [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == *" ok installed" ]]; }
has_candidate() { [[ "$(apt-cache policy "$1" 2>/dev/null)" == *"Candidate: "[0-9]* ]]; }

missing=()
for p in "$@"; do
  installed "$p" || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

SUDO=()
if [[ "$(id -u)" != 0 ]]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    echo "$me: need root (or password-less sudo) to install: ${missing[*]}" >&2
    exit 77
  fi
fi

log=$(mktemp -t loaderbench-apt.XXXXXX)
policy=/usr/sbin/policy-rc.d
made_policy=0
cleanup() {
  if ((made_policy)); then "${SUDO[@]}" rm -f "$policy"; fi
  rm -f "$log"
}
trap cleanup EXIT

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
  for p in "${missing[@]}"; do  # apt-get update exits 0 even when every source failed
    if ! has_candidate "$p"; then
      cat "$log" >&2
      echo "$me: no installable candidate for $p after apt-get update" >&2
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
  do_update  # ... or when the lists are stale (a version the archive no longer has: 404)
  if ! install; then
    cat "$log" >&2
    unreachable && exit 75
    exit 1
  fi
fi
