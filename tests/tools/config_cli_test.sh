#!/usr/bin/env bash
# `actorlm config check|show`: exit codes, messages, and that `show` output re-parses.
# Usage: config_cli_test.sh ACTORLM_BINARY PROJECT_SOURCE_DIR
set -u
actorlm=$1
source_dir=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# expect_exit CODE|nonzero NAME COMMAND...: runs COMMAND with stdout/stderr in $tmp/out, $tmp/err.
expect_exit() {
  local expected=$1 name=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local actual=$?
  if [[ $expected == nonzero && $actual -ne 0 ]]; then return; fi
  if [[ $actual -ne $expected ]]; then
    fail "$name: exit $actual, expected $expected"
    sed 's/^/  stdout: /' "$tmp/out" >&2
    sed 's/^/  stderr: /' "$tmp/err" >&2
  fi
}

expect_in() {  # expect_in FILE TEXT NAME
  grep -qF -- "$2" "$1" || { fail "$3: '$2' not in $(basename "$1")"; sed 's/^/  /' "$1" >&2; }
}

expect_exit 0 "check default.toml" "$actorlm" config check "$source_dir/configs/default.toml"
expect_in "$tmp/out" "$source_dir/configs/default.toml: ok" "check default.toml"

expect_exit 0 "check embedded default" "$actorlm" config check
expect_in "$tmp/out" "<embedded default>: ok" "check embedded default"

bad="$source_dir/tests/tools/bad_config.toml"
expect_exit 1 "check bad_config.toml" "$actorlm" config check "$bad"
expect_in "$tmp/err" "bad_config.toml:3:1: scheduler.max_num_seq: unknown key; did you mean 'max_num_seqs'?" \
  "check bad_config.toml"
expect_in "$tmp/err" "$bad: 1 error(s)" "check bad_config.toml"

missing="$tmp/no_such_config.toml"
expect_exit 1 "check missing file" "$actorlm" config check "$missing"
expect_in "$tmp/err" "$missing: cannot read config file" "check missing file"

expect_exit 1 "show bad_config.toml" "$actorlm" config show "$bad"
expect_in "$tmp/err" "did you mean 'max_num_seqs'?" "show bad_config.toml"

for source in "$source_dir/configs/default.toml" ""; do
  name="show ${source:-embedded default}"
  expect_exit 0 "$name" "$actorlm" config show ${source:+"$source"}
  cp "$tmp/out" "$tmp/shown.toml"
  for section in server engine cache scheduler model sim cluster; do
    expect_in "$tmp/shown.toml" "[$section]" "$name"
  done
  expect_in "$tmp/shown.toml" 'dtype = "f16"' "$name lists cache.dtype"
  expect_exit 0 "$name re-parses" "$actorlm" config check "$tmp/shown.toml"
done

expect_exit 0 "config --help" "$actorlm" config --help
expect_in "$tmp/out" "check" "config --help"
expect_exit nonzero "config without a subcommand" "$actorlm" config

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all config CLI checks passed"
