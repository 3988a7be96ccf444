#!/usr/bin/env bash
# Configures and builds actorlm. Usage: tools/build.sh [--sanitize]
#   default     build/       RelWithDebInfo; CUDA kernels compiled when nvcc is found
#   --sanitize  build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer, CUDA off
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh

# nvcc may be installed without being on PATH.
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi

# ccache: paths relative to the checkout, so that another clone (CI's) reuses this machine's cache.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1

dir=build
args=(-G Ninja)
if [[ "${1:-}" == "--sanitize" ]]; then
  dir=build-asan
  args+=(-DACTORLM_SANITIZE=ON -DACTORLM_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug)
fi
jobs=$(( $(nproc) < 2 ? 1 : 2 ))
cmake -S . -B "$dir" "${args[@]}" >&2
cmake --build "$dir" -j"$jobs" >&2
echo "$dir"
