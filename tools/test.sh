#!/usr/bin/env bash
# Builds actorlm and runs the whole test suite through CTest.
# Usage: tools/test.sh [--sanitize]   (--sanitize: the same suite under ASan + UBSan)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(bash tools/build.sh "$@")
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
# CAF's own shutdown leak (see the file); leaks in actorlm's code are still reported.
export LSAN_OPTIONS=suppressions=$PWD/tools/sanitizers/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$dir" --output-on-failure -j2
