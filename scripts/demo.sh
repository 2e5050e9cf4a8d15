#!/usr/bin/env bash
# Set up a virtual environment with the library and the extras the demo needs, then run `layerscale demo`.
# Usage: ./scripts/demo.sh [demo arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet -e ".[data,train,plots]"
exec "$VENV/bin/layerscale" demo "$@"
