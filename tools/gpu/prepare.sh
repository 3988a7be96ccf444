#!/usr/bin/env bash
# Prepares what a GPU machine needs to run tools/gpu/check.sh when it has none of our Debian
# libraries (CAF, Boost, OpenBLAS...), as the lent H200 machines have not: builds the GPU tests and
# benchmarks here (build/, CUDA for sm_80/86/90) and copies them, with the shared libraries they
# load that are not the C library's own, with a list of the GPU tests as CTest runs them, into
# .gpu-bundle/bundle.tar.xz (git-ignored; about 8 MB, inside the device tool's 64 MiB). Carry
# .gpu-bundle to the GPU machine and run tools/gpu/check.sh there.
#
#   tools/gpu/prepare.sh          then, on the GPU machine:   tools/gpu/check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/build.sh >/dev/null
rm -rf .gpu-bundle
bundle=.gpu-bundle/stage
mkdir -p "$bundle/bin" "$bundle/lib"

# The GPU tests (CTest label gpu) and the GPU benchmarks.
# tests.txt: name, program, arguments; the programs' paths (in their suites' build folders) apart.
ctest --test-dir build -L gpu --show-only=json-v1 | python3 -c '
import json, os, sys
tests = json.load(sys.stdin)["tests"]
with open(sys.argv[1], "w") as f:
    for t in tests:
        print(t["name"], os.path.basename(t["command"][0]), *t["command"][1:], file=f)
for t in tests:
    print(t["command"][0])
' "$bundle/tests.txt" >"$bundle/../programs.txt"
bins=$(cat "$bundle/../programs.txt")
bins+=" build/tools/decode_attention_bench build/tools/gemm_bench build/tools/sample_bench build/tools/actorlm"
for b in $bins; do
  [[ -x $b ]] || { echo "prepare: $b was not built (is nvcc found? ACTORLM_CUDA=ON?)" >&2; exit 1; }
  cp "$b" "$bundle/bin/"
  strip --strip-debug "$bundle/bin/$(basename "$b")"
done

# Their shared libraries, except the C library's (the GPU machine's own, newer, serve), the
# driver's libcuda (only the GPU machine's own matches its driver), cuBLAS (600 MB) and NCCL
# (200 MB): check.sh finds the GPU machine's own, from its CUDA toolkit or PyTorch's wheels.
for b in "$bundle"/bin/*; do ldd "$b"; done | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libmvec.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libcuda.so*|libcublas*|libnccl*) ;;
    *) cp -L "$lib" "$bundle/lib/" ;;
  esac
done
echo "prepare: $(ls "$bundle/bin" | wc -l) programs, $(ls "$bundle/lib" | wc -l) libraries ($(du -sh "$bundle" | cut -f1))"
tar -C "$bundle" -cf - . | xz -T2 -6 >.gpu-bundle/bundle.tar.xz
rm -rf "$bundle"
echo "prepare: .gpu-bundle/bundle.tar.xz ($(du -h .gpu-bundle/bundle.tar.xz | cut -f1)); carry .gpu-bundle and run tools/gpu/check.sh"
