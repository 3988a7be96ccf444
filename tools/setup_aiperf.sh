#!/usr/bin/env bash
# Creates .venv/aiperf with NVIDIA's AIPerf load tool (the successor of genai-perf), pinned with
# every dependency (tools/aiperf-constraints.txt, a `pip freeze` of a working install), from
# PyPI, for tests/actors/http/aiperf_test.sh: a load tool nobody on the team wrote, sending what the
# ecosystem's benchmarks send (vLLM's ignore_eos, stream_options, max_completion_tokens, its own
# X-Request-Id) and reading usage as OpenAI writes it. About 1.2 GB (transformers, pandas, dash,
# scipy...; no torch), so tools/setup.sh leaves it out; CI (.ci/run) runs it. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/pinned_venv.sh
pinned_venv .venv/aiperf aiperf 0.13.0 "1.2 GB" tools/aiperf-constraints.txt "aiperf==0.13.0"
