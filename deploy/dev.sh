#!/usr/bin/env bash
# One entry point for a fresh machine:  bash deploy/dev.sh run | test [--fast] | checks | setup | bench
#   setup  create .venv and install replmon with its pinned dependencies (idempotent)
#   run    setup, then `replmon run --demo` (the embedded simulated cluster); with arguments,
#          `replmon run ARGS` (e.g. --input events/ --once)
#   test   setup, the static checks (ruff check, ruff format --check, mypy), then start the local
#          Kafka broker and Redis (deploy/local) and run the whole test suite; it prints every
#          skip and xfail with its reason and the 25 slowest steps, and fails on any skip not
#          listed as expected in tests/skip_policy.py (--strict-skips)
#   test --fast
#          setup, the static checks, then only the tests that need no service, no Spark and no
#          package index (-m "not spark and not services and not judge and not wheel"; a test's
#          own throwaway redis-server counts as none, and skips saying so where it is not
#          installed): about 90 s of CPU. CI runs the whole suite.
#   checks setup, then only the static checks
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$root/.venv"

need() { command -v "$1" >/dev/null 2>&1 || { echo "dev.sh: '$1' is required but not installed ($2)" >&2; exit 2; }; }

setup() {
  need python3 "Python >= 3.11"
  need java "a Java 17 runtime for Spark and Kafka"
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
  fi
  stamp="$venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)"
  if [ ! -f "$stamp" ]; then
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -e ".[test]"
    touch "$stamp"
  fi
}

# ruff (lint and format) and mypy, configured in pyproject.toml; fails on the first that fails.
# mypy runs through deploy/typecheck.py, which maps the source folders to replmon.* for it.
checks() {
  local py="$venv/bin/python"
  echo "checks: ruff check" && "$py" -m ruff check --quiet . \
    && echo "checks: ruff format --check" && "$py" -m ruff format --check --quiet . \
    && echo "checks: mypy" && "$py" deploy/typecheck.py
}

# The fast tier: what needs no service, no Spark session and no package index.
FAST="not spark and not services and not judge and not wheel"

cmd="${1:-}"; shift || true
case "$cmd" in
  setup) setup ;;
  checks)
    setup
    checks ;;
  run)
    setup
    if [ $# -eq 0 ]; then set -- --demo; fi
    exec "$venv/bin/replmon" run "$@" ;;
  test)
    setup
    checks
    if [ "${1:-}" = "--fast" ]; then
      shift
      set +e
      "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider -m "$FAST" "$@"
      rc=$?
      set -e
      exit $rc
    fi
    bash deploy/local/services.sh up
    bash deploy/local/chromium.sh      # the replay report is rendered in headless Chromium
    set +e
    "$venv/bin/python" -m pytest -q -rsx --durations=25 --strict-skips -p no:cacheprovider "$@"
    rc=$?
    set -e
    # pytest exits 5 when it collected nothing: that is a failure here, never a pass.
    exit $rc ;;
  bench)
    setup
    exec "$venv/bin/python" bench/throughput.py "$@" ;;
  *)
    echo "usage: bash deploy/dev.sh run|test [--fast]|checks|setup|bench [args]" >&2; exit 2 ;;
esac
