#!/usr/bin/env bash
# Creates .venv/aiperf with NVIDIA's AIPerf load tool (the successor of genai-perf), pinned with
# every dependency (tools/aiperf-constraints.txt, a `pip freeze` of a working install), from
# PyPI, for tests/actors/http/aiperf_test.sh: a load tool nobody on the team wrote, sending what the
# ecosystem's benchmarks send (vLLM's ignore_eos, stream_options, max_completion_tokens, its own
# X-Request-Id) and reading usage as OpenAI writes it. About 1.2 GB (transformers, pandas, dash,
# scipy...; no torch), so tools/setup.sh leaves it out; CI (.ci/run) runs it. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.13.0
venv=.venv/aiperf
if [[ -x $venv/bin/python ]] && $venv/bin/python -c "
import importlib.metadata as m, sys
sys.exit(m.version('aiperf') != '$version')" 2>/dev/null; then
  echo "setup: aiperf $version present in $venv" >&2
  exit 0
fi
echo "setup: installing aiperf $version into $venv (PyPI, about 1.2 GB)" >&2
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -c tools/aiperf-constraints.txt "aiperf==$version" >&2
