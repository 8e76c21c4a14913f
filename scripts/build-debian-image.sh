#!/usr/bin/env bash
# Builds `roder-sandbox-debian:latest`, a sandbox image for real work: a
# minimal Debian (bookworm) root with git, python3, gcc, libc6-dev and make,
# debootstrap'ed from Debian's package mirror (no container registry is
# reachable here, so nothing can be pulled) and imported with `docker import`.
# The tiny busybox image (scripts/build-sandbox-image.sh) stays the one the
# fast tests use; this one is for tests that need a real toolchain.
#
# Idempotent and quick when nothing changed: the image carries a label with
# a hash of this script and its settings, and the script exits at once when
# the image exists with the same hash. The root file system is cached as a
# tarball (and debootstrap's downloaded .debs beside it) outside the repo, in
# RODER_CACHE_DIR (default /var/cache/roder as root, else
# ${XDG_CACHE_HOME:-~/.cache}/roder), so a removed image is re-imported
# without a download.
#
# Settings (part of the hash): RODER_DEBIAN_SUITE (bookworm),
# RODER_DEBIAN_MIRROR (http://deb.debian.org/debian, the mirror this
# machine's apt sources use), RODER_SANDBOX_DEBIAN_IMAGE (the tag).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE="${RODER_SANDBOX_DEBIAN_IMAGE:-roder-sandbox-debian:latest}"
SUITE="${RODER_DEBIAN_SUITE:-bookworm}"
MIRROR="${RODER_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# gcc + libc6-dev + make rather than build-essential: build-essential adds
# g++ and dpkg-dev (perl and its modules), tens of MB no test needs.
PACKAGES="git,python3,gcc,libc6-dev,make,ca-certificates,procps"
LABEL_KEY="dev.roder.sandbox.inputs"

if [ "$(id -u)" = 0 ]; then
  default_cache=/var/cache/roder
else
  default_cache="${XDG_CACHE_HOME:-$HOME/.cache}/roder"
fi
CACHE="${RODER_CACHE_DIR:-$default_cache}"

inputs="$( (cat scripts/build-debian-image.sh; printf '%s\n' "$SUITE" "$MIRROR" "$PACKAGES" "$(dpkg --print-architecture 2>/dev/null || uname -m)") | sha256sum | cut -c1-16)"

existing="$(docker image inspect --format "{{ index .Config.Labels \"$LABEL_KEY\" }}" "$IMAGE" 2>/dev/null || true)"
if [ "$existing" = "$inputs" ]; then
  echo "== $IMAGE is up to date (inputs $inputs)"
  docker image inspect --format '{{.Id}} {{.Size}} bytes' "$IMAGE"
  exit 0
fi

started=$SECONDS
mkdir -p "$CACHE/debs"
tarball="$CACHE/debian-$SUITE-$inputs.tar"

if [ ! -s "$tarball" ]; then
  if ! command -v debootstrap >/dev/null; then
    echo "== installing debootstrap"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
  fi
  root="$(mktemp -d "$CACHE/root.XXXXXX")"
  trap 'rm -rf "$root" "$tarball.partial"' EXIT
  echo "== debootstrap $SUITE (minbase + $PACKAGES) from $MIRROR"
  debootstrap --variant=minbase --include="$PACKAGES" --cache-dir="$CACHE/debs" \
    "$SUITE" "$root" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 || {
      tail -n 40 "$CACHE/debootstrap.log" >&2
      echo "debootstrap failed; the whole log is $CACHE/debootstrap.log" >&2
      exit 1
    }

  echo "== trimming and configuring the root"
  # Package lists, docs, man pages and locales: nothing in a sandbox reads them.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin \
    "$root"/var/cache/apt/archives/*.deb "$root"/usr/share/doc/* \
    "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/log/*.log
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} +
  # `sandbox` (1000:1000) is the non-root user a destination's `"user":
  # "1000:1000"` runs as; its home is /tmp, writable in a confined container
  # (whose root filesystem is read-only), as in the busybox image.
  if ! grep -q '^sandbox:' "$root/etc/passwd"; then
    echo 'sandbox:x:1000:1000:sandbox:/tmp:/bin/bash' >>"$root/etc/passwd"
    echo 'sandbox:x:1000:' >>"$root/etc/group"
    echo 'sandbox:*:19000:0:99999:7:::' >>"$root/etc/shadow"
  fi
  mkdir -p "$root/workspace"
  chmod 1777 "$root/tmp"
  # A container's hostname and resolver are Docker's; don't ship the host's.
  : >"$root/etc/hostname"
  rm -f "$root/etc/resolv.conf"

  echo "== packing the root into $tarball"
  tar --numeric-owner --xattrs -C "$root" -cf "$tarball.partial" .
  mv "$tarball.partial" "$tarball"
  rm -rf "$root"
  trap - EXIT
  # Older roots (other inputs) are dead weight.
  find "$CACHE" -maxdepth 1 -name "debian-*.tar" ! -name "$(basename "$tarball")" -delete
fi

old_id="$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
echo "== importing $IMAGE"
docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'WORKDIR /workspace' \
  --change 'CMD ["/bin/bash"]' \
  --change 'LABEL dev.roder.sandbox="1"' \
  --change "LABEL dev.roder.sandbox.flavour=\"debian-$SUITE\"" \
  --change "LABEL $LABEL_KEY=\"$inputs\"" \
  --message "roder sandbox: Debian $SUITE minbase + $PACKAGES" \
  "$tarball" "$IMAGE" >/dev/null
# The replaced image would linger untagged (a few hundred MB); it stays
# only while a container still uses it.
new_id="$(docker image inspect --format '{{.Id}}' "$IMAGE")"
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
  docker image rm "$old_id" >/dev/null 2>&1 || true
fi
docker image inspect --format '{{.Id}} {{.Size}} bytes' "$IMAGE"
echo "== built $IMAGE in $((SECONDS - started)) s"
