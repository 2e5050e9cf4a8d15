#!/usr/bin/env bash
# Set up a virtual environment with everything the tests need (pinned), then run the whole test suite.
# Usage: ./scripts/test.sh [extra pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet -c constraints/test.txt -e ".[dev]"
# Optional real data: Debian's Fashion-MNIST package lets the real-data tests run (they skip without it).
if [ ! -d /usr/share/datasets/fashion-mnist ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1; }) \
    || echo "note: dataset-fashion-mnist not installed; real-data tests will be skipped"
fi
# The tests run in parallel on the machine's cores (pytest-xdist; at most 4 workers, each imports torch and builds
# models): about half the wall time of one process on 2 cores. Pass -n 0 to run them in one process.
exec "$VENV/bin/python" -m pytest -q -n auto --maxprocesses 4 "$@"
