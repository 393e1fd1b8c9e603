#!/usr/bin/env bash
# A Spark standalone cluster on loopback for replmon: one master and two workers, started from
# the pyspark that the project's interpreter has installed (its bin/spark-class), no download.
# Usually run through `deploy/local/services.sh up --spark` / `down`.
#
# Usage: deploy/local/spark-cluster.sh up | down | status | kill-worker N
#
#   up           starts what is not running, waits until both workers are ALIVE at the master,
#                then writes .run/spark/env (REPLMON_SPARK_MASTER=spark://127.0.0.1:PORT).
#   down         stops the workers (with their executors) and the master.
#   kill-worker  SIGKILLs worker N and its executors (one process group): a lost machine, for
#                tests. `up` starts it again.
#
# Ports (127.0.0.1, each plus REPLMON_PORT_OFFSET): master 17077, master UI 18080, workers
# 17078-17079, worker UIs 18081-18082. Each worker offers REPLMON_SPARK_WORKER_CORES (1) cores
# and REPLMON_SPARK_WORKER_MEMORY (1g) to executors. Pid files, logs and work folders:
# $REPLMON_SERVICES_RUN/spark (default .run/spark), so the `services.sh down` of another run
# dir never stops this one's cluster.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRUN="${REPLMON_SERVICES_RUN:-$HERE/.run}/spark"  # beside the services of the same run dir
HOST=127.0.0.1
# shellcheck source=deploy/local/lib.sh
. "$HERE/lib.sh"   # PY (the project's interpreter), port_open, pid_matches
OFFSET="${REPLMON_PORT_OFFSET:-0}"
MASTER_PORT=$((17077 + OFFSET))
MASTER_UI=$((18080 + OFFSET))
WORKERS=2
CORES="${REPLMON_SPARK_WORKER_CORES:-1}"
MEMORY="${REPLMON_SPARK_WORKER_MEMORY:-1g}"
TIMEOUT="${REPLMON_SERVICES_TIMEOUT:-120}"
MASTER_URL="spark://$HOST:$MASTER_PORT"

log() { echo "spark-cluster: $*" >&2; }
die() { echo "spark-cluster: ERROR: $*" >&2; exit 1; }

spark_home() {
  "$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2>/dev/null \
    || die "'$PY' cannot import pyspark (run deploy/dev.sh setup, or set REPLMON_PYTHON)"
}

master_running() { pid_matches "$SRUN/master.pid" "--port $MASTER_PORT "; }
worker_port() { echo $((MASTER_PORT + $1)); }
worker_ui() { echo $((MASTER_UI + $1)); }
worker_running() { pid_matches "$SRUN/worker-$1.pid" "--port $(worker_port "$1")"; }

# start_daemon NAME CLASS ARGS...: a JVM in its own session (process group = its pid), so that
# it outlives this shell and kill-worker can end it together with the executors it launched.
start_daemon() {
  local name="$1"; shift
  mkdir -p "$SRUN/logs"
  rm -f "$SRUN/$name.pid"
  echo "===== start $(date -u +%FT%TZ) =====" >>"$SRUN/logs/$name.log"
  # shellcheck disable=SC2016  # $$ and "$@" belong to the inner shell
  SPARK_HOME="$SH" SPARK_LOCAL_IP="$HOST" SPARK_LOG_DIR="$SRUN/logs" \
  SPARK_DAEMON_MEMORY="${REPLMON_SPARK_DAEMON_MEMORY:-256m}" SPARK_NO_DAEMONIZE=1 \
  PYSPARK_PYTHON="$PY" \
    setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$SRUN/$name.pid" \
      "$SH/bin/spark-class" "$@" </dev/null >>"$SRUN/logs/$name.log" 2>&1 9>&- &
  local i
  for i in $(seq 1 50); do [ -s "$SRUN/$name.pid" ] && return 0; sleep 0.1; done
  die "$name did not start (no pid file; log $SRUN/logs/$name.log)"
}

alive_workers() {  # how many workers the master lists as ALIVE (0 when it does not answer)
  "$PY" - "$MASTER_UI" <<'EOF' 2>/dev/null || echo 0
import json, sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/json/", timeout=2) as r:
    state = json.load(r)
print(sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE"))
EOF
}

cmd_up() {
  command -v java >/dev/null 2>&1 || die "java not found; install a JDK 17"
  SH="$(spark_home)"
  mkdir -p "$SRUN"
  if ! master_running; then
    for p in "$MASTER_PORT" "$MASTER_UI"; do
      port_open "$p" && die "port $p is taken by a process this script did not start"
    done
    start_daemon master org.apache.spark.deploy.master.Master \
      --host "$HOST" --port "$MASTER_PORT" --webui-port "$MASTER_UI"
    log "started the master on $MASTER_URL (UI http://$HOST:$MASTER_UI)"
  fi
  local i
  for i in $(seq 1 "$WORKERS"); do
    worker_running "$i" && continue
    mkdir -p "$SRUN/worker-$i"
    start_daemon "worker-$i" org.apache.spark.deploy.worker.Worker \
      --host "$HOST" --port "$(worker_port "$i")" --webui-port "$(worker_ui "$i")" \
      --cores "$CORES" --memory "$MEMORY" --work-dir "$SRUN/worker-$i" "$MASTER_URL"
    log "started worker $i ($CORES core(s), $MEMORY)"
  done
  local deadline=$((SECONDS + TIMEOUT)) n=0
  while [ "$SECONDS" -lt "$deadline" ]; do
    master_running || { tail -n 30 "$SRUN/logs/master.log" >&2; die "the master exited"; }
    n="$(alive_workers)"
    [ "$n" -ge "$WORKERS" ] && break
    sleep 1
  done
  if [ "$n" -lt "$WORKERS" ]; then
    for i in $(seq 1 "$WORKERS"); do tail -n 20 "$SRUN/logs/worker-$i.log" >&2 || true; done
    die "only $n of $WORKERS workers registered with $MASTER_URL within ${TIMEOUT}s"
  fi
  echo "REPLMON_SPARK_MASTER=$MASTER_URL" >"$SRUN/env.tmp"
  echo "REPLMON_SPARK_MASTER_UI=http://$HOST:$MASTER_UI" >>"$SRUN/env.tmp"
  mv "$SRUN/env.tmp" "$SRUN/env"
  log "up: $MASTER_URL with $n workers; env in $SRUN/env"
}

stop_pidfile() {  # stop_pidfile NAME PATTERN: SIGTERM the process group, SIGKILL after 20 s
  local f="$SRUN/$1.pid" pid i
  if pid_matches "$f" "$2"; then
    pid="$(cat "$f")"
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
    for i in $(seq 1 200); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 -- "-$pid" 2>/dev/null || true
    log "stopped $1 (pid $pid)"
    rm -f "$f"
  elif ! kill -0 "$(cat "$f" 2>/dev/null)" 2>/dev/null; then
    rm -f "$f"  # stale; a live process on other ports keeps its pid file, or it could not be stopped later
  fi
}

cmd_down() {
  local i
  for i in $(seq 1 "$WORKERS"); do stop_pidfile "worker-$i" "--port $(worker_port "$i")"; done
  stop_pidfile master "--port $MASTER_PORT "
  rm -f "$SRUN/env"
}

cmd_kill_worker() {
  local i="${1:-}" pid
  [[ "$i" =~ ^[0-9]+$ ]] && [ "$i" -ge 1 ] && [ "$i" -le "$WORKERS" ] || die "kill-worker needs 1..$WORKERS"
  worker_running "$i" || die "worker $i is not running"
  pid="$(cat "$SRUN/worker-$i.pid")"
  kill -9 -- "-$pid"
  log "killed worker $i and its executors (process group $pid)"
}

cmd_status() {
  local ok=0 i
  if master_running; then
    echo "spark master: running, pid $(cat "$SRUN/master.pid"), $MASTER_URL, UI http://$HOST:$MASTER_UI, $(alive_workers) alive worker(s)"
  else
    echo "spark master: stopped"; ok=1
  fi
  for i in $(seq 1 "$WORKERS"); do
    if worker_running "$i"; then
      echo "  worker $i: running, pid $(cat "$SRUN/worker-$i.pid"), port $(worker_port "$i"), log $SRUN/logs/worker-$i.log"
    else
      echo "  worker $i: stopped"; ok=1
    fi
  done
  return "$ok"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  kill-worker) shift; cmd_kill_worker "$@" ;;
  -h|--help|help) sed -n '2,18p' "$0" ;;
  *) echo "usage: $0 up | down | status | kill-worker N" >&2; exit 2 ;;
esac
