#!/usr/bin/env bash
# The README's two commands as a new user meets them: in a fresh Debian 12
# root made by `debootstrap --variant=minbase bookworm` (no compiler, no
# CUDA, no /etc/hosts, only the registries reachable), on a clone of this
# checkout's HEAD, it runs
#   ./scripts/install-deps.sh && make test
# and then checks `make run`: the server starts on the embedded default
# model, answers health, gRPC generation, the HTTP API and /metrics, and
# drains to exit 0 on SIGTERM. Prints the time of each part and each test
# stage's result; exits non-zero when anything failed. Run by hand (root,
# debootstrap installed), not by CI: it takes most of an hour on 2 cores.
#
#   sudo scripts/fresh-machine-check.sh [--dir DIR] [--mirror URL] [--data DIR]
#                                       [--reuse-root] [--run-only]
#
# DIR (default /var/tmp/tributary-fresh) receives the root (root/, made once
# and reused for later checks only with --reuse-root) and the log. --data is
# the team's data folder the tests read (default: TRIBUTARY_SHARED_DIR's
# default, ../shared next to the checkout); it is placed beside the clone as
# CI places it. Uncommitted changes are not part of the clone: commit first.
# --reuse-root keeps a root made before (its packages installed);
# --run-only checks only `make run`, in the root and clone of a previous
# check, the clone moved to this checkout's HEAD (an incremental build).
set -euo pipefail

dir=/var/tmp/tributary-fresh
mirror=http://deb.debian.org/debian
src=$(cd "$(dirname "$0")/.." && pwd)
data="$src/../shared"
reuse_root=0
run_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --mirror) mirror=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --reuse-root) reuse_root=1; shift ;;
    --run-only) run_only=1; reuse_root=1; shift ;;
    *) echo "usage: $0 [--dir DIR] [--mirror URL] [--data DIR] [--reuse-root] [--run-only]" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "fresh-machine-check: needs root (debootstrap, chroot, mounts)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "fresh-machine-check: needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
[ -d "$data/data" ] || { echo "fresh-machine-check: no data folder at $data/data (--data DIR)" >&2; exit 1; }
if [ -n "$(git -C "$src" status --porcelain --untracked-files=no)" ]; then
  echo "fresh-machine-check: note: uncommitted changes in $src are not checked" >&2
fi

root="$dir/root"
log="$dir/check-$(date -u +%Y%m%dT%H%M%SZ).log"
mkdir -p "$dir"
exec > >(tee "$log") 2>&1

now() { date +%s; }
took() { local s=$(( $(now) - $1 )); printf '%d min %02d s' $((s / 60)) $((s % 60)); }
results=()
failed=0
record() {  # record NAME RC START
  if [ "$2" -eq 0 ]; then results+=("  $1: passed ($(took "$3"))")
  else results+=("  $1: FAILED, exit $2 ($(took "$3"))"); failed=1; fi
}

mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" || true; done
}
trap cleanup EXIT
mount_in() {  # mount_in TYPE-OR-BIND SOURCE TARGET
  mkdir -p "$3"
  if [ "$1" = bind ]; then mount --bind "$2" "$3"; else mount -t "$1" "$2" "$3"; fi
  mounted+=("$3")
}

if [ "$reuse_root" -eq 0 ] || [ ! -x "$root/bin/bash" ]; then
  rm -rf "$root"
  start=$(now)
  debootstrap --variant=minbase bookworm "$root" "$mirror"
  echo "fresh-machine-check: debootstrap took $(took "$start")"
fi

# The clone and the data folder, laid out as CI lays them out.
if [ "$run_only" -eq 1 ] && [ -d "$root/work/tributary/.git" ]; then
  git -C "$root/work/tributary" fetch --quiet "$src" HEAD
  git -C "$root/work/tributary" checkout --quiet --detach FETCH_HEAD
else
  rm -rf "$root/work"
  mkdir -p "$root/work"
  git clone --quiet --no-hardlinks "$src" "$root/work/tributary"
  cp -r "$data" "$root/work/shared"
fi
echo "fresh-machine-check: checking $(git -C "$root/work/tributary" log -1 --format='%h %s' | cut -c1-72)"

# How this machine reaches the registries is the machine's, not the
# project's: its resolver, the certificate authorities it adds (an egress
# proxy's, say: ca-certificates, which install-deps.sh brings, takes them
# into the system store), and its proxy and CA variables.
cp /etc/resolv.conf "$root/etc/resolv.conf"
if [ -d /usr/local/share/ca-certificates ]; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp -r /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
fi
network_env=()
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY \
         SSL_CERT_FILE PIP_CERT REQUESTS_CA_BUNDLE CURL_CA_BUNDLE PIP_INDEX_URL; do
  if [ -n "${!v:-}" ]; then network_env+=("$v=${!v}"); fi
done
mount_in proc proc "$root/proc"
mount_in sysfs sysfs "$root/sys"
mount_in bind /dev "$root/dev"
mount_in devpts devpts "$root/dev/pts"

in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    "${network_env[@]}" \
    bash -c "cd /work/tributary || exit 1
$1"
}

if [ "$run_only" -eq 0 ]; then
  start=$(now)
  set +e
  # A root whose ca-certificates came with debootstrap takes the added
  # authorities now; otherwise its installation by install-deps.sh does.
  in_root 'if command -v update-ca-certificates > /dev/null; then update-ca-certificates > /dev/null; fi; ./scripts/install-deps.sh && make test'
  rc=$?
  set -e
  record "install-deps.sh && make test" "$rc" "$start"
fi

# make run: serve, answer, drain. The server's process is found by name
# (minbase has no pgrep).
start=$(now)
set +e
in_root '
  make run > /tmp/make-run.log 2>&1 &
  make_pid=$!
  client=build/client/tributary
  serving=0
  for _ in $(seq 1 300); do
    if "$client" health --timeout 2 > /dev/null 2>&1; then serving=1; break; fi
    sleep 1
  done
  [ "$serving" -eq 1 ] || { echo "make run: not serving after 300 s"; tail -20 /tmp/make-run.log; exit 1; }
  "$client" generate "ROMEO:" --max-new-tokens 16 --temperature 0 || exit 1
  echo
  # curl came with install-deps.sh.
  curl -sf http://127.0.0.1:8000/v1/completions -H "content-type: application/json" \
    -d "{\"model\": \"tiny-shakespeare\", \"prompt\": \"ROMEO:\", \"max_tokens\": 8}" || exit 1
  echo
  curl -sf http://127.0.0.1:9464/metrics | grep -m 3 "^tributary_residual_update_to_stream_ratio" || exit 1
  server_pid=
  for p in /proc/[0-9]*; do
    [ "$(cat "$p/comm" 2>/dev/null)" = tributary-serve ] && server_pid=${p#/proc/}
  done
  [ -n "$server_pid" ] || { echo "make run: no server process"; exit 1; }
  kill -TERM "$server_pid"
  wait "$make_pid"
  rc=$?
  echo "make run: exit $rc after SIGTERM"
  exit $rc
'
rc=$?
set -e
record "make run (serve, answer, drain)" "$rc" "$start"

echo "== fresh-machine-check =="
printf '%s\n' "${results[@]}"
echo "log: $log"
exit "$failed"
