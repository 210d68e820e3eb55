#!/usr/bin/env bash
# tools/python_env.sh: the Python environment of the outside engines
# (tools/jax_engine.py), a virtual environment at .venv/ in the workspace.
#
#   tools/python_env.sh          # create it, or check the one there
#   .venv/bin/python tools/jax_engine.py DIR
#
# Creates .venv/ with /usr/bin/python3 -m venv when it is missing and installs
# the pinned packages below from PyPI with pip (pip's cache, ~/.cache/pip,
# makes a second install on the same machine fast). When .venv/ exists and
# already has every pinned version, it installs nothing and returns at once.
# Prints what it installs. On success prints "python env: .venv/bin/python
# (PACKAGES)" and exits 0; when it cannot (no network, no wheel for this
# Python, no venv module) prints "SKIPPED: <reason>" and exits 1, leaving no
# half-made .venv/ behind.
#
# To add a package (torch for tools/torch_engine.py), append its pin to
# PINNED; the next run installs it into the existing environment.
set -uo pipefail
cd "$(dirname "$0")/.."

# Every package pinned, its dependencies too, so that two runs on two
# machines get the same wheels. jax and jaxlib (CPU) must match each other;
# these install on CPython 3.11 (Debian bookworm's /usr/bin/python3).
PINNED=(
  jax==0.10.2
  jaxlib==0.10.2
  numpy==2.3.5
  ml_dtypes==0.6.0
  opt_einsum==3.4.0
  scipy==1.17.1
)
PYTHON=${REMAT_VENV_PYTHON:-/usr/bin/python3}
VENV=.venv

skip() {
  echo "SKIPPED: $*"
  exit 1
}

# Whether the environment has exactly the pinned versions (pip's own view,
# without the network).
has_pins() {
  local frozen
  frozen=$("$VENV/bin/python" -m pip freeze --disable-pip-version-check 2>/dev/null) || return 1
  local pin
  for pin in "${PINNED[@]}"; do
    grep -qixF "$pin" <<<"$frozen" || return 1
  done
}

if [[ -x "$VENV/bin/python" ]] && has_pins; then
  echo "python env: $VENV/bin/python ($(IFS=' '; echo "${PINNED[*]}")), already installed"
  exit 0
fi

[[ -x "$PYTHON" ]] || skip "no $PYTHON to make a virtual environment with"
created=0
if [[ ! -x "$VENV/bin/python" ]]; then
  rm -rf "$VENV"
  if ! out=$("$PYTHON" -m venv "$VENV" 2>&1); then
    rm -rf "$VENV"
    skip "$PYTHON -m venv $VENV failed: $(tail -n 1 <<<"$out")"
  fi
  created=1
fi
echo "python env: installing into $VENV: ${PINNED[*]}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input \
    "${PINNED[@]}" >"$log" 2>&1; then
  tail -n 5 "$log"
  ((created)) && rm -rf "$VENV"
  skip "pip install into $VENV failed: $(grep -m1 -E 'ERROR|error' "$log" || tail -n 1 "$log")"
fi
grep -E '^Successfully installed|^Requirement already satisfied' "$log" | sort -u
has_pins || skip "$VENV lacks a pinned version after pip install (pip freeze: $("$VENV/bin/python" -m pip freeze 2>&1 | tr '\n' ' '))"
echo "python env: $VENV/bin/python (${PINNED[*]})"
