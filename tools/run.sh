#!/usr/bin/env bash
# The main job on its embedded default: builds actorlm, checks the default configuration and
# runs the block-manager benchmark (the daemon, `actorlm serve`, arrives with a later issue).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(bash tools/build.sh)
"$dir/tools/actorlm" config check
"$dir/tools/actorlm" bench kv
