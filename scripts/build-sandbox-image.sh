#!/usr/bin/env bash
# Builds `roder-sandbox:latest`, the image the docker runner's tests and the
# `provision` benchmark use, from local files only: no registry is reachable
# here, so the image is FROM scratch plus Debian's busybox-static.
#
# Idempotent: installs busybox-static only when /bin/busybox is missing, and
# rebuilding an unchanged image is a cache hit.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE="${RODER_SANDBOX_IMAGE:-roder-sandbox:latest}"

if [ ! -x /bin/busybox ]; then
  echo "== installing busybox-static (for /bin/busybox)"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q busybox-static
fi
# A dynamically linked busybox would not run in a FROM scratch image
# (`ldd` succeeds only on dynamic executables).
if ldd /bin/busybox >/dev/null 2>&1; then
  echo "/bin/busybox is dynamically linked; install busybox-static instead" >&2
  exit 1
fi

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
cp images/sandbox/Dockerfile "$context/Dockerfile"
cp /bin/busybox "$context/busybox"

echo "== building $IMAGE"
docker build --quiet --tag "$IMAGE" "$context"
docker image inspect --format '{{.Id}} {{.Size}} bytes' "$IMAGE"
