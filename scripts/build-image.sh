#!/usr/bin/env bash
# Builds the CPU container image of tributary-server without a container
# registry: a Debian 12 base made locally with debootstrap and imported into
# podman, then `podman build --isolation=chroot` (no runtime with namespaces
# or cgroups is needed, which is all these machines allow). See
# deploy/README.md.
#
#   scripts/build-image.sh [--tag NAME] [--work DIR] [--mirror URL]
#
# Needs root, podman and debootstrap (apt-get install podman debootstrap) and
# a reachable Debian mirror. The base image is made once and reused (delete
# it with `podman rmi localhost/debian:bookworm` to make it again). The GPU
# image is built elsewhere, from the NVIDIA CUDA images (deploy/README.md).
set -euo pipefail

tag=localhost/tributary:cpu
work=/var/tmp/tributary-image
mirror=http://deb.debian.org/debian
base=localhost/debian:bookworm

while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --mirror) mirror=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "build-image: unknown argument $1" >&2; exit 1 ;;
  esac
done

die() { echo "build-image: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap and podman build need it)"
for tool in podman debootstrap; do
  command -v "$tool" >/dev/null || die "$tool not found: apt-get install podman debootstrap"
done

repo=$(cd "$(dirname "$0")/.." && pwd)
start=$(date +%s)
stamp() { echo "build-image: [$(( $(date +%s) - start ))s] $*"; }

if podman image exists "$base"; then
  stamp "base image $base present"
else
  # minbase: only Essential packages and apt; the Dockerfile's stages install
  # the rest. The tarball is imported as a one-layer image.
  rootfs=$work/rootfs
  rm -rf "$rootfs"
  mkdir -p "$rootfs"
  stamp "debootstrap bookworm into $rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror"
  # Like the official image: no cached package lists, a clean apt state.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
  stamp "importing $rootfs as $base"
  tar -C "$rootfs" --numeric-owner -c . | podman import \
    --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$base"
  rm -rf "$rootfs"
fi

stamp "podman build $tag"
# --isolation=chroot: RUN steps run in a chroot of the layer, sharing the
# host's network (to reach the Debian mirror) and needing no user namespaces.
# --format docker: the OCI image format has no HEALTHCHECK and no SHELL, and
# podman would silently drop both. The same base serves both stages; the
# Dockerfile's defaults name the registry images (debian:bookworm,
# debian:bookworm-slim).
podman build --isolation=chroot --format docker \
  --build-arg BUILD_IMAGE="$base" \
  --build-arg RUNTIME_IMAGE="$base" \
  --build-arg JOBS="$(nproc)" \
  -t "$tag" -f "$repo/Dockerfile" "$repo"
stamp "built $tag"
podman image ls "$tag"
