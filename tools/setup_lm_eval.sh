#!/usr/bin/env bash
# Creates .venv/lmeval with EleutherAI's lm-evaluation-harness and its API models (lm-eval[api]),
# plus transformers for the tokenizer its local-completions model encodes with, pinned with every
# dependency (tools/lm-eval-constraints.txt, a `pip freeze` of a working install), from PyPI, for
# tests/actors/http/lm_eval_test.sh: how people evaluate a served model, and the client that sends
# echo with logprobs (prompt log-probabilities). About 0.9 GB (datasets, pandas, scikit-learn,
# transformers; no torch), so tools/setup.sh leaves it out; CI (.ci/run) runs it. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/pinned_venv.sh
pinned_venv .venv/lmeval lm_eval 0.4.13 "0.9 GB" tools/lm-eval-constraints.txt "lm-eval[api]==0.4.13" transformers
