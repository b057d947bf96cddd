#!/usr/bin/env bash
# Build orgate's container image from the Dockerfile and test it with podman (tests/deploy):
# non-root, read-only root filesystem, data in a volume, the health check, JSON logs.
#
# No image registry is reachable here, so the base image is built from Debian packages
# (debootstrap: Debian 12 with python3) and cached as a tarball under
# ${XDG_CACHE_HOME:-~/.cache}/orgate-test/ (about 5 minutes the first time). podman, runc and
# debootstrap are installed from Debian packages when missing. Needs root (debootstrap).
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/orgate-test"
BASE=localhost/orgate-test-base:bookworm
IMAGE=localhost/orgate:test
mkdir -p "$CACHE"

missing=()
for tool in podman runc debootstrap; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if ((${#missing[@]})); then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# These machines refuse podman's defaults: the process lacks CAP_SYS_RESOURCE (so the default
# rlimits cannot be set) and cgroups are v1/v2 hybrid (which crun refuses; runc accepts it).
export CONTAINERS_CONF="$CACHE/containers.conf"
printf '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n' >"$CONTAINERS_CONF"

if ! podman image exists "$BASE"; then
  tarball="$CACHE/debian-bookworm-python.tar"
  if [ ! -s "$tarball" ]; then
    root="$(mktemp -d)"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
      bookworm "$root" http://deb.debian.org/debian >&2
    # this machine's trust store (the network may re-sign TLS) and pip told to use it
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
    printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$root/etc/pip.conf"
    tar -C "$root" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$root"
  fi
  podman import --change 'CMD ["/bin/bash"]' "$tarball" "$BASE" >/dev/null
fi

# --format docker keeps HEALTHCHECK (the OCI image format has no such field)
podman build --quiet --format docker --network host --build-arg BASE="$BASE" -t "$IMAGE" . >/dev/null

ORGATE_TEST_CONTAINER_IMAGE="$IMAGE" .venv/bin/python -m pytest -q -p no:cacheprovider tests/deploy "$@"
