#!/usr/bin/env bash
# Shared by tools/setup_aiperf.sh and tools/setup_lm_eval.sh (sourced): a virtual environment
# holding one PyPI tool at a pinned version, every dependency pinned by a constraints file (a
# `pip freeze` of a working install). Idempotent: nothing is done when the version is there.
# pinned_venv VENV DIST VERSION SIZE CONSTRAINTS REQUIREMENT...
#   DIST, VERSION: the distribution whose installed version decides (importlib.metadata's name);
#   SIZE: what the install takes, for the message; REQUIREMENT...: what pip installs.
pinned_venv() {
  local venv=$1 dist=$2 version=$3 size=$4 constraints=$5
  shift 5
  if [[ -x $venv/bin/python ]] && $venv/bin/python -c "
import importlib.metadata as m, sys
sys.exit(m.version('$dist') != '$version')" 2>/dev/null; then
    echo "setup: $dist $version present in $venv" >&2
    return 0
  fi
  echo "setup: installing $dist $version into $venv (PyPI, about $size)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -c "$constraints" "$@" >&2
}
