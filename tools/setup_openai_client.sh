#!/usr/bin/env bash
# Creates .venv/openai with the official `openai` Python package (pinned) from PyPI, for the
# end-to-end client test (tests/actors/http/openai_client_test.py). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
version=3.57.0
venv=.venv/openai
if [[ -x $venv/bin/python ]] && $venv/bin/python -c "import openai, sys; sys.exit(openai.__version__ != '$version')" 2>/dev/null; then
  echo "setup: openai $version present in $venv" >&2
  exit 0
fi
echo "setup: installing openai $version into $venv (PyPI)" >&2
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "openai==$version" >&2
