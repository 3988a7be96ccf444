#!/usr/bin/env bash
# Creates .venv/openai with the official `openai` Python package and Prometheus's Python client
# (its text-format parser checks /metrics), pinned, from PyPI, for the end-to-end client test
# (tests/actors/http/openai_client_test.py). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
version=3.57.0
prometheus_version=0.21.1
venv=.venv/openai
if [[ -x $venv/bin/python ]] && $venv/bin/python -c "
import importlib.metadata as m, sys
sys.exit(m.version('openai') != '$version' or m.version('prometheus-client') != '$prometheus_version')" 2>/dev/null; then
  echo "setup: openai $version and prometheus-client $prometheus_version present in $venv" >&2
  exit 0
fi
echo "setup: installing openai $version and prometheus-client $prometheus_version into $venv (PyPI)" >&2
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "openai==$version" "prometheus-client==$prometheus_version" >&2
