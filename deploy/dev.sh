#!/usr/bin/env bash
# One entry point for a fresh machine:  bash deploy/dev.sh run | test [--fast] | checks | setup | bench
#   setup  create .venv and install replmon with its pinned dependencies (idempotent)
#   run    setup, then `replmon run --demo` (the embedded simulated cluster); with arguments,
#          `replmon run ARGS` (e.g. --input events/ --once)
#   test   setup, the static checks (ruff check, ruff format --check, mypy), then start the local
#          Kafka broker and Redis (deploy/local) and run the whole test suite; it prints every
#          skip and xfail with its reason and the 25 slowest steps, and fails on any skip not
#          listed as expected in tests/skip_policy.py (--strict-skips); the judge's tests run
#          beside the rest on services of their own (beside_the_rest below)
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

PYTEST_FULL="-q -rsx --durations=25 --strict-skips -p no:cacheprovider"

# The whole suite as two groups side by side: the judge's (real 3-broker clusters driven through
# faults: mostly waiting on Kafka's timers, about half the suite's time) on services of its own
# (ports +2000, deploy/local/.run-judge-services), and the rest on the default ones. Each prints
# its own report; the judge group's comes second. Fails when either fails (exit 5, nothing
# collected, included). REPLMON_TEST_SERIAL=1 runs them one after the other instead.
beside_the_rest() {
  local offset=$(( ${REPLMON_PORT_OFFSET:-0} + 2000 )) log="$root/.cache/judge-group.log" jpid rc jrc
  local -a judge_env=(REPLMON_PORT_OFFSET="$offset" REPLMON_SERVICES_RUN="$root/deploy/local/.run-judge-services")
  mkdir -p "$root/.cache"
  env "${judge_env[@]}" bash deploy/local/services.sh up >/dev/null
  env "${judge_env[@]}" "$venv/bin/python" -m pytest $PYTEST_FULL -m judge >"$log" 2>&1 &
  jpid=$!
  set +e
  "$venv/bin/python" -m pytest $PYTEST_FULL -m "not judge"
  rc=$?
  wait "$jpid"
  jrc=$?
  set -e
  echo
  echo "==================== the judge group (run beside the rest; exit $jrc) ===================="
  cat "$log"
  env "${judge_env[@]}" bash deploy/local/services.sh down >/dev/null 2>&1 || true
  if [ "$rc" -ne 0 ]; then exit "$rc"; fi
  exit "$jrc"
}

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
    if [ $# -gt 0 ] || [ -n "${REPLMON_TEST_SERIAL:-}" ]; then
      set +e
      "$venv/bin/python" -m pytest $PYTEST_FULL "$@"
      rc=$?
      set -e
      exit $rc   # pytest exits 5 when it collected nothing: a failure here, never a pass
    fi
    beside_the_rest ;;
  bench)
    setup
    exec "$venv/bin/python" bench/throughput.py "$@" ;;
  *)
    echo "usage: bash deploy/dev.sh run|test [--fast]|checks|setup|bench [args]" >&2; exit 2 ;;
esac
