#!/usr/bin/env bash
# Install what storage = "http" cells need, only when missing: nginx (the server the suite starts per cell)
# and iproute2 (`ip` and `tc`: the network namespace, veth pair and tbf/netem qdiscs that shape the path).
#
#   suite/storage/install-tools.sh        # quiet; prints nothing when everything is there
#
# Run by `make test` (and the Docker image installs the same packages). The packages' maintainer scripts
# would start a system-wide nginx on port 80; the suite runs private servers only, so that is forbidden
# (policy-rc.d) while installing.
#
# Exit status: 0 installed (or already there), 75 the package archive could not be reached, 77 not root and
# no password-less sudo, 1 anything else. The apt log is printed on failure.
set -euo pipefail

pkgs=(nginx iproute2)

installed() { [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == *" ok installed" ]]; }
has_candidate() { [[ "$(apt-cache policy "$1" 2>/dev/null)" == *"Candidate: "[0-9]* ]]; }

if ! command -v dpkg-query >/dev/null; then
  command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || {
    echo "install-tools.sh: not a Debian system; install nginx and iproute2 with this system's package manager" >&2
    exit 1
  }
  exit 0
fi

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
    echo "install-tools.sh: need root (or password-less sudo) to install: ${missing[*]}" >&2
    exit 77
  fi
fi

log=$(mktemp -t loaderbench-storage-apt.XXXXXX)
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
      echo "install-tools.sh: no installable candidate for $p after apt-get update" >&2
      unreachable && exit 75
      exit 1
    fi
  done
}

for p in "${missing[@]}"; do
  if ! has_candidate "$p"; then
    do_update
    break
  fi
done

install() { "${apt[@]}" install --no-install-recommends "${missing[@]}" >>"$log" 2>&1; }
if ! install; then
  do_update  # stale package lists (a version the archive no longer has)
  if ! install; then
    cat "$log" >&2
    unreachable && exit 75
    exit 1
  fi
fi
