#!/usr/bin/env bash
# `cargo fmt` for this repository: formats every Rust file except the two
# conformance files, which must stay byte-for-byte as shipped in
# ../shared/conformance (remote_runner_api.rs was cut out of an indented
# module, so rustfmt would re-wrap one of its lines). `--check` only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
args=(--edition 2024)
if [ "${1:-}" = "--check" ]; then
  args+=(--check)
fi
git ls-files --cached --others --exclude-standard -- '*.rs' \
  | grep -vxE 'crates/roder-(core/tests/remote_runner|api/tests/remote_runner_api)\.rs' \
  | xargs rustfmt "${args[@]}"
