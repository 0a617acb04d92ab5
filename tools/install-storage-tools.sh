#!/usr/bin/env bash
# Install what storage = "http" cells need, only when missing: nginx (the server the suite starts per cell)
# and iproute2 (`ip` and `tc`: the network namespace, veth pair and tbf/netem qdiscs that shape the path).
#
#   tools/install-storage-tools.sh        # quiet; prints nothing when everything is there
#
# Run by `make test` (and the Docker image installs the same packages). The packages' maintainer scripts
# would start a system-wide nginx on port 80; the suite runs private servers only, so that is forbidden
# (policy-rc.d) while installing.
#
# Exit status: as tools/apt-ensure.sh (0 ok, 75 archive unreachable, 77 not root, 1 other).
set -euo pipefail

pkgs=(nginx iproute2)

if ! command -v dpkg-query >/dev/null; then
  command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || {
    echo "install-storage-tools.sh: not a Debian system; install nginx and iproute2 with this system's package manager" >&2
    exit 1
  }
  exit 0
fi
exec "$(dirname "$0")/apt-ensure.sh" "${pkgs[@]}"
