#!/usr/bin/env bash
# Creates .venv/lmeval with EleutherAI's lm-evaluation-harness and its API models (lm-eval[api]),
# plus transformers for the tokenizer its local-completions model encodes with, pinned with every
# dependency (tools/lm-eval-constraints.txt, a `pip freeze` of a working install), from PyPI, for
# tests/actors/http/lm_eval_test.sh: how people evaluate a served model, and the client that sends
# echo with logprobs (prompt log-probabilities). About 0.9 GB (datasets, pandas, scikit-learn,
# transformers; no torch), so tools/setup.sh leaves it out; CI (.ci/run) runs it. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.4.13
venv=.venv/lmeval
if [[ -x $venv/bin/python ]] && $venv/bin/python -c "
import importlib.metadata as m, sys
sys.exit(m.version('lm_eval') != '$version')" 2>/dev/null; then
  echo "setup: lm-eval $version present in $venv" >&2
  exit 0
fi
echo "setup: installing lm-eval $version into $venv (PyPI, about 0.9 GB)" >&2
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -c tools/lm-eval-constraints.txt "lm-eval[api]==$version" transformers >&2
