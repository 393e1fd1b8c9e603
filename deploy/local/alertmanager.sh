#!/usr/bin/env bash
# A local Prometheus Alertmanager for replmon's tests and for trying the Alertmanager sink by hand.
# Opt-in: `deploy/local/services.sh up --alertmanager` (or REPLMON_SERVICES_ALERTMANAGER=1) calls this;
# tests that need it start it through tests/integration/conftest.py.
#
# Usage: deploy/local/alertmanager.sh up|down|status
#   up      installs Debian's prometheus-alertmanager if missing, starts it on 127.0.0.1 with
#           deploy/alertmanager/alertmanager.yml (clustering off), waits until /-/ready answers
#   down    stops the process this script started (pid file under .run/alertmanager)
# Port: 19393 + REPLMON_PORT_OFFSET (19093 is broker 2 of the 3-broker cluster). Data and log: deploy/local/.run/alertmanager/
# (REPLMON_ALERTMANAGER_RUN, else $REPLMON_SERVICES_RUN/alertmanager); the configuration: deploy/alertmanager/alertmanager.yml (REPLMON_ALERTMANAGER_CONFIG).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN="${REPLMON_ALERTMANAGER_RUN:-${REPLMON_SERVICES_RUN:-$HERE/.run}/alertmanager}"  # a second instance: its own dir and port offset
CONFIG="${REPLMON_ALERTMANAGER_CONFIG:-$HERE/../alertmanager/alertmanager.yml}"
HOST=127.0.0.1
PORT=$((19393 + ${REPLMON_PORT_OFFSET:-0}))
BIN=prometheus-alertmanager

log() { echo "alertmanager: $*" >&2; }
die() { echo "alertmanager: ERROR: $*" >&2; exit 1; }
port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }
running() {
  [ -s "$RUN/pid" ] && [ -r "/proc/$(cat "$RUN/pid")/cmdline" ] \
    && tr '\0' ' ' <"/proc/$(cat "$RUN/pid")/cmdline" | grep -qF -- "$HOST:$PORT"
}
ready() { "${REPLMON_PYTHON:-python3}" - "$HOST" "$PORT" <<'PY' 2>/dev/null
import sys, urllib.request
with urllib.request.urlopen(f"http://{sys.argv[1]}:{sys.argv[2]}/-/ready", timeout=2) as r:
    sys.exit(0 if r.status == 200 else 1)
PY
}

install() {
  command -v "$BIN" >/dev/null 2>&1 && return 0
  log "$BIN not found; installing Debian's prometheus-alertmanager with apt-get"
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "not root and no sudo: apt-get install -y prometheus-alertmanager"
    sudo="sudo -n"
  fi
  mkdir -p "$RUN"
  { $sudo apt-get update && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y \
      --no-install-recommends prometheus-alertmanager; } </dev/null >"$RUN/apt.log" 2>&1 \
    || die "apt-get install prometheus-alertmanager failed (log: $RUN/apt.log)"
}

up() {
  install
  mkdir -p "$RUN/data"
  if running; then log "already running on $HOST:$PORT"; return 0; fi
  port_open "$PORT" && die "port $PORT is taken by a process this script did not start"
  [ -f "$CONFIG" ] || die "config not found: $CONFIG"
  nohup "$BIN" --config.file="$CONFIG" --storage.path="$RUN/data" \
    --web.listen-address="$HOST:$PORT" --cluster.listen-address= \
    </dev/null >"$RUN/alertmanager.log" 2>&1 9>&- &
  echo $! >"$RUN/pid"
  for _ in $(seq 1 100); do
    if ready; then log "up on http://$HOST:$PORT"; return 0; fi
    running || { tail -n 30 "$RUN/alertmanager.log" >&2; die "it exited"; }
    sleep 0.2
  done
  tail -n 30 "$RUN/alertmanager.log" >&2
  die "not ready within 20 s"
}

down() {
  if running; then kill "$(cat "$RUN/pid")" && log "stopped"; fi
  rm -f "$RUN/pid"
}

case "${1:-}" in
  up) up; echo "REPLMON_ALERTMANAGER__URL=http://$HOST:$PORT" ;;
  down) down ;;
  status) if running && ready; then echo "alertmanager: running on http://$HOST:$PORT"; else echo "alertmanager: not running"; exit 1; fi ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
