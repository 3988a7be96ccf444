#!/usr/bin/env bash
# Sourced by tools/setup.sh and tools/fuzz/run.sh: apt_install_missing TAG PACKAGE... installs the
# Debian packages that are not installed yet (apt-get update only when something is missing;
# sudo when not root). TAG prefixes its messages.
apt_install_missing() {
  local tag=$1
  shift
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    echo "$tag: all packages present" >&2
    return 0
  fi
  echo "$tag: installing ${missing[*]}" >&2
  local sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}
