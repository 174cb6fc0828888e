#!/usr/bin/env bash
# Smoke check of a built image without a container runtime (`podman run`
# lacks the permissions it needs on these machines): export the image's
# filesystem, then, in a chroot and as the image's user, start its ENTRYPOINT
# with its ENV, run its HEALTHCHECK command as a runtime would, generate a few
# tokens with the image's client, read /metrics, and send SIGTERM, which must
# drain and exit 0.
#
#   scripts/smoke-image.sh [IMAGE]      (default localhost/tributary:cpu)
#
# Needs root (chroot, mounts) and podman; uses the image's own ports (50051,
# 50052, 9464), which must be free on this machine.
set -euo pipefail

image=${1:-localhost/tributary:cpu}
die() { echo "smoke-image: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (chroot and mounts)"
command -v podman >/dev/null || die "podman not found"
podman image exists "$image" || die "no image $image: run scripts/build-image.sh"
for port in 50051 50052 9464; do
  if ss -Hltn "sport = :$port" | grep -q .; then die "port $port is in use"; fi
done

start=$(date +%s)
stamp() { echo "smoke-image: [$(( $(date +%s) - start ))s] $*"; }

work=$(mktemp -d /var/tmp/tributary-smoke.XXXXXX)
root=$work/rootfs
server_pid=
container=
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  for m in etc/resolv.conf etc/hosts dev proc; do
    mountpoint -q "$root/$m" && umount "$root/$m"
  done
  [ -n "$container" ] && podman rm -f "$container" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

# The image's configuration, as a runtime would read it.
podman image inspect "$image" > "$work/inspect.json"
config() { python3 -c "import json,sys; d=json.load(open('$work/inspect.json'))[0]; $1"; }
user=$(config 'print(d["Config"]["User"])')
mapfile -t entrypoint < <(config 'print("\n".join(d["Config"]["Entrypoint"]))')
mapfile -t env < <(config 'print("\n".join(d["Config"].get("Env", [])))')
mapfile -t healthcheck < <(config 'print("\n".join(d["Healthcheck"]["Test"][1:]))')
[ "$(config 'print(d["Healthcheck"]["Test"][0])')" = CMD ] || die "HEALTHCHECK is not an exec-form CMD"
stamp "image $image: user $user, entrypoint ${entrypoint[*]}, healthcheck ${healthcheck[*]}"

container=$(podman create "$image")
mkdir -p "$root"
podman export "$container" | tar -x -C "$root"
# podman rm complains that no systemd runs the (never started) healthcheck
# timer: harmless here.
podman rm "$container" >/dev/null 2>&1
container=
stamp "exported $(du -sh "$root" | cut -f1) to $root"

# What a runtime provides: /proc, /dev, and the host's name resolution.
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
for f in hosts resolv.conf; do
  touch "$root/etc/$f"
  mount --bind "/etc/$f" "$root/etc/$f"
done

in_image() { env -i "${env[@]}" chroot --userspec="$user" "$root" "$@"; }

# Not through in_image: a function in the background is a subshell, and $!
# would be that shell, not the server. env and chroot exec, so this pid is
# the server's.
env -i "${env[@]}" chroot --userspec="$user" "$root" "${entrypoint[@]}" \
  > "$work/server.log" 2>&1 &
server_pid=$!
stamp "started ${entrypoint[*]} (pid $server_pid)"

healthy=0
for _ in $(seq 60); do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    cat "$work/server.log"; die "the server exited before it was healthy"
  fi
  if in_image "${healthcheck[@]}" > "$work/health.out" 2>&1; then healthy=1; break; fi
  sleep 1
done
cat "$work/server.log"
[ "$healthy" = 1 ] || { cat "$work/health.out"; die "HEALTHCHECK never passed"; }
stamp "HEALTHCHECK (${healthcheck[*]}): $(cat "$work/health.out")"

generated=$(in_image tributary --target 127.0.0.1:50051 --timeout 30 \
  generate "ROMEO:" --max-new-tokens 24 --temperature 0)
stamp "generate \"ROMEO:\": $(printf %q "$generated")"

metrics=$(python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:9464/metrics", timeout=5).read().decode())')
echo "$metrics" | grep -E '^tributary_(build_info|requests_total|generation_tokens_total)'
echo "$metrics" | grep -q '^tributary_build_info{' || die "no tributary_build_info on /metrics"

kill -TERM "$server_pid"
rc=0
wait "$server_pid" || rc=$?
server_pid=
tail -n 3 "$work/server.log"
[ "$rc" = 0 ] || die "SIGTERM: the server exited $rc, expected 0"
stamp "SIGTERM: drained, exit 0"
echo "smoke-image: PASS"
