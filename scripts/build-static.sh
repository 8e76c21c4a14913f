#!/usr/bin/env bash
# Builds a `roder` with no dynamic dependencies, for machines whose libc is
# older than this one's or absent (Alpine, busybox, old Ubuntu task images
# in evaluation harnesses): glibc linked statically (`+crt-static`, as the
# sandbox executor is built), for x86_64-unknown-linux-gnu (the only target
# installed here; no musl toolchain is needed). Model requests over HTTPS
# work without a system CA store (the built-in roots,
# roder-ext-inference-http's tls_roots.rs). Prints the binary's path on the last line.
#
#   scripts/build-static.sh            # debug profile (fast to build; CI)
#   scripts/build-static.sh --release  # optimised
#
# The binary lands in $CARGO_TARGET_DIR (default target/) under
# x86_64-unknown-linux-gnu/{debug,release}/roder; an unchanged tree is a
# no-op rebuild.
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-unknown-linux-gnu
profile=debug
args=()
if [ "${1:-}" = "--release" ]; then
  profile=release
  args+=(--release)
fi
# Static glibc: the linker warns that getaddrinfo and getpwuid want glibc's
# shared NSS modules at run time. /etc/hosts and DNS lookups are built into
# libc since glibc 2.34, so they work anyway; only other NSS modules do not.
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! CARGO_ENCODED_RUSTFLAGS="$(printf '%s\x1f%s' '-Ctarget-feature=+crt-static' '-Cstrip=debuginfo')" \
  cargo build --quiet -p roder-cli --bin roder --target "$target" "${args[@]}" 2>"$log"; then
  cat "$log" >&2
  exit 1
fi
grep -v -e 'statically linked applications requires at runtime' -e 'in function' "$log" >&2 || true
binary="${CARGO_TARGET_DIR:-target}/$target/$profile/roder"
if [ ! -x "$binary" ]; then
  echo "the static build did not produce $binary" >&2
  exit 1
fi
# No program interpreter and no shared library needed (a static-pie
# binary, which `ldd` calls "statically linked" with exit 0).
if readelf --program-headers --dynamic "$binary" | grep -q -e 'program interpreter' -e '(NEEDED)'; then
  echo "$binary is dynamically linked" >&2
  exit 1
fi
echo "$binary"
