#!/usr/bin/env bash
# Fallback base image for machines that cannot pull the pinned python image from Docker Hub.
#
#   containers/make-local-base.sh [TAG]     (default TAG: loaderbench-base:bookworm-local)
#
# Builds a Debian 12 (bookworm) minbase root file system with debootstrap and imports it into
# the local Docker daemon. It carries Debian's own Python (python3 3.11.2, with venv and
# headers), NOT the python.org CPython 3.11.x of the pinned `python:3.11-slim-bookworm` image:
# same Debian release and C libraries, a different patch release and build of the
# interpreter. An image built on it is fine for testing the container recipe (the lock, the
# pillow-simd build, the fingerprint) but it is not the published image; its
# LOADERBENCH_BASE_IMAGE env and org.opencontainers.image.base.name label say so.
#
# Needs root, debootstrap (`apt-get install debootstrap`), a reachable Debian mirror and docker.
set -euo pipefail

TAG="${1:-loaderbench-base:bookworm-local}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm

command -v debootstrap >/dev/null || { echo "make-local-base: debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }
command -v docker >/dev/null || { echo "make-local-base: docker is missing" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "make-local-base: debootstrap needs root" >&2; exit 1; }

ROOTFS="$(mktemp -d /tmp/loaderbench-rootfs.XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT

echo "make-local-base: debootstrap --variant=minbase $SUITE from $MIRROR (about a minute)"
debootstrap --variant=minbase \
    --include=python3,python3-venv,python3-dev,ca-certificates \
    "$SUITE" "$ROOTFS" "$MIRROR" >"$ROOTFS.log" 2>&1 || {
        tail -20 "$ROOTFS.log" >&2; echo "make-local-base: debootstrap failed (log: $ROOTFS.log)" >&2; exit 1; }

# The same apt sources as Debian's bookworm images: release, updates and security.
cat >"$ROOTFS/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb http://deb.debian.org/debian-security $SUITE-security main
EOF
# Security and point-release updates, as in Debian's (regularly rebuilt) bookworm images.
chroot "$ROOTFS" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get upgrade -y -qq' >"$ROOTFS.log" 2>&1 || {
    tail -20 "$ROOTFS.log" >&2; echo "make-local-base: apt-get upgrade failed (log: $ROOTFS.log)" >&2; exit 1; }
# Keep the image small, as Debian's docker images do.
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/cache/apt/archives/*.deb
PYVER="$(chroot "$ROOTFS" python3 -c 'import platform; print(platform.python_version())')"

tar -C "$ROOTFS" -c . | docker import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["python3"]' \
    --message "loaderbench fallback base: debootstrap $SUITE minbase + Debian python3 $PYVER" \
    - "$TAG" >/dev/null
rm -f "$ROOTFS.log"
echo "make-local-base: imported $TAG (Debian $SUITE, Debian's python3 $PYVER)"
