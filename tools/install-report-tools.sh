#!/usr/bin/env bash
# Install what the report's browser test needs, only when missing: Debian's chromium, run headless to open
# figures/report.html and check that every inlined figure decodes and renders (tests/test_report_browser.py).
#
#   tools/install-report-tools.sh        # quiet; prints nothing when everything is there
#
# Run by `make test`, as tools/install-storage-tools.sh is.
#
# Exit status: as tools/apt-ensure.sh (0 ok, 75 archive unreachable, 77 not root, 1 other).
set -euo pipefail

pkgs=(chromium)

if ! command -v dpkg-query >/dev/null; then
  command -v chromium >/dev/null || command -v chromium-browser >/dev/null || {
    echo "install-report-tools.sh: not a Debian system; install chromium with this system's package manager" >&2
    exit 1
  }
  exit 0
fi
exec "$(dirname "$0")/apt-ensure.sh" "${pkgs[@]}"
