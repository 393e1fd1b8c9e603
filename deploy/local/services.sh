#!/usr/bin/env bash
# Local services for replmon's integration tests and for trying it by hand:
# an Apache Kafka cluster in KRaft mode and a Redis server, both on loopback,
# started from jars and Debian packages (no Docker).
#
# Usage: deploy/local/services.sh up [--brokers 1|3] [--alertmanager] [--spark] [--security]
#        deploy/local/services.sh down
#        deploy/local/services.sh status
#        deploy/local/services.sh clean      (down, then delete .run/: data and logs)
#
#   up      installs redis-server (apt) and fetches the jars if missing, formats
#           the KRaft storage on first use, starts what is not running, waits
#           until Kafka and Redis answer, then writes .run/env. Idempotent:
#           when everything already runs it only checks and rewrites .run/env.
#   down    stops the processes this script started (pid files under .run/);
#           data stays, so the next up is a restart, not a new cluster.
#   status  prints what runs; exit 0 when Kafka and Redis are both up.
#   --spark also starts a Spark standalone master and two workers (deploy/local/spark-cluster.sh;
#           opt-in: only the cluster tests need it); down stops them too.
#   --security  secured listeners beside PLAINTEXT (opt-in: the security tests use it):
#           SASL_PLAINTEXT and SASL_SSL with SCRAM-SHA-512, and SSL (TLS, no client
#           certificate). Kafka's own storage tool creates the SCRAM user when it formats
#           the storage (format --add-scram); keytool makes the TLS keys (a local CA that
#           signs the brokers' certificate for 127.0.0.1); all in .run/kafka/security. It is
#           a property of the formatted cluster: up --security on a cluster formatted
#           without it formats a new one (refused while that runs). .run/env then also
#           names the secured bootstraps, the user, its password and the CA file (PEM).
#
# Ports (all on 127.0.0.1): Kafka 19092 (1 broker) or 19092-19094 (3 brokers),
# KRaft controller listeners 19192(-19194), Redis 16379; with --security also
# SASL_PLAINTEXT 19142(-19144), SSL 19152(-19154), SASL_SSL 19162(-19164). Logs and data live in
# deploy/local/.run/ (git-ignored). Environment knobs:
#   REPLMON_PYTHON            interpreter with kafka-python (probe) and pyspark
#                             (jar version); default: the repo's .venv if there
#                             is one, else python3
#   REPLMON_SERVICES_TIMEOUT  seconds to wait for Kafka to answer (default 120)
#   REPLMON_KAFKA_HEAP        JVM heap flags per node (default -Xms128m -Xmx512m)
#   REPLMON_PORT_OFFSET       added to every port above (default 0), so that two checkouts
#                             (e.g. git worktrees) can run their own services side by side
#   REPLMON_SERVICES_RUN      run dir (default deploy/local/.run); a second cluster (the
#                             judge's 3 brokers) uses its own dir and port offset
#   REPLMON_REQUEST_LOG       1: each broker writes kafka.request.logger at DEBUG to its own
#                             rolling logs/kafka-request.log (deploy/kafka/log4j2-request-log.properties);
#                             default 1 with --brokers 3, else 0; 0 turns it off (bench/broker_cost.py)
#   REPLMON_REQUEST_LOG_FRAGMENT  the log4j2 (4.x) or log4j (3.x) lines appended when the request
#                             log is on (default deploy/kafka/log4j2-request-log.properties or
#                             log4j-request-log.properties); read on every start
#   REPLMON_REPLICA_LAG_TIME_MAX_MS, REPLMON_BROKER_SESSION_TIMEOUT_MS
#                             replica.lag.time.max.ms / broker.session.timeout.ms (Kafka's
#                             defaults when unset); read on every start
#   REPLMON_KAFKA_NODE_PROPS_<i>  extra server.properties lines for node i, ';'-separated
#                             (e.g. "replica.fetch.max.bytes=2048"); read on every start
#   REPLMON_KAFKA_VERSION     the brokers' Kafka version (default: deploy/kafka/pom.xml's, in
#                             kafka-libs/); another one is fetched into kafka-libs-<version>/.
#                             3.x brokers log through log4j 1.x (reload4j, as Kafka 3.x ships):
#                             deploy/local/log4j.properties + deploy/kafka/log4j-request-log.properties
#   REPLMON_KAFKA_MODE        kraft (default) or zk: 3.x only, brokers with a ZooKeeper
#                             (QuorumPeerMain from the same jars) on 12181
#   REPLMON_KAFKA_IBP         inter.broker.protocol.version of zk-mode brokers (e.g. 3.0: follower
#                             FETCH v12, which names topics instead of topic ids)
#   A run dir set up for another version or mode is formatted anew (its data is lost).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN="${REPLMON_SERVICES_RUN:-$HERE/.run}"
POM_KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$HERE/../kafka/pom.xml")"
KAFKA_VERSION="${REPLMON_KAFKA_VERSION:-$POM_KAFKA_VERSION}"
if [ "$KAFKA_VERSION" = "$POM_KAFKA_VERSION" ]; then
  KAFKA_LIBS="$HERE/kafka-libs"
else
  KAFKA_LIBS="$HERE/kafka-libs-$KAFKA_VERSION"
fi
case "$KAFKA_VERSION" in [0-3].*) LOG4J1=1 ;; *) LOG4J1=0 ;; esac
KAFKA_MODE="${REPLMON_KAFKA_MODE:-kraft}"
SPARK_JARS="$HERE/jars"
# shellcheck source=deploy/local/lib.sh
. "$HERE/lib.sh"   # PY (the project's interpreter), HOST, port_open, pid_matches
export REPLMON_PYTHON="$PY"  # fetch-jars.sh uses the same one
TIMEOUT="${REPLMON_SERVICES_TIMEOUT:-120}"
HEAP="${REPLMON_KAFKA_HEAP:--Xms128m -Xmx512m}"
HOST=127.0.0.1
PORT_OFFSET="${REPLMON_PORT_OFFSET:-0}"
BROKER_BASE_PORT=$((19092 + PORT_OFFSET))
CONTROLLER_BASE_PORT=$((19192 + PORT_OFFSET))
ZK_PORT=$((12181 + PORT_OFFSET))
# Not a multiple of 100 away from the other ports, as the offsets of side-by-side checkouts are.
SASL_BASE_PORT=$((19142 + PORT_OFFSET))
SSL_BASE_PORT=$((19152 + PORT_OFFSET))
SASL_SSL_BASE_PORT=$((19162 + PORT_OFFSET))
REDIS_PORT=$((16379 + PORT_OFFSET))
KRUN="$RUN/kafka"
RRUN="$RUN/redis"
SECURITY_DIR="$KRUN/security"

log() { echo "services: $*" >&2; }
die() { echo "services: ERROR: $*" >&2; exit 1; }

case "$KAFKA_MODE" in
  kraft) ;;
  zk) [ "$LOG4J1" = 1 ] || die "REPLMON_KAFKA_MODE=zk needs a 3.x REPLMON_KAFKA_VERSION (4.x has no ZooKeeper mode)" ;;
  *) die "REPLMON_KAFKA_MODE must be kraft or zk, not '$KAFKA_MODE'" ;;
esac

# ---------------------------------------------------------------- helpers


tail_log() {  # tail_log FILE [N]
  local f="$1" n="${2:-40}"
  if [ -s "$f" ]; then
    echo "----- last $n lines of $f -----" >&2
    tail -n "$n" "$f" >&2
    echo "-----" >&2
  else
    echo "(no log at $f)" >&2
  fi
}

node_dir() { echo "$KRUN/node-$1"; }
broker_port() { echo $((BROKER_BASE_PORT + $1 - 1)); }
controller_port() { echo $((CONTROLLER_BASE_PORT + $1 - 1)); }
sasl_port() { echo $((SASL_BASE_PORT + $1 - 1)); }
ssl_port() { echo $((SSL_BASE_PORT + $1 - 1)); }
sasl_ssl_port() { echo $((SASL_SSL_BASE_PORT + $1 - 1)); }
secured() { [ -s "$SECURITY_DIR/scram-password" ]; }  # the formatted cluster has secured listeners
kafka_pidfile() { echo "$(node_dir "$1")/kafka.pid"; }
kafka_running() { pid_matches "$(kafka_pidfile "$1")" "$(node_dir "$1")/server.properties"; }

bootstrap_for() {  # bootstrap_for N [PORT_FUNCTION]
  local i out="" port="${2:-broker_port}"
  for i in $(seq 1 "$1"); do out="${out:+$out,}$HOST:$("$port" "$i")"; done
  echo "$out"
}

configured_brokers() { cat "$KRUN/brokers" 2>/dev/null || echo 0; }

spark_jar_list() {
  local j out=""
  for j in "$SPARK_JARS"/*.jar; do [ -e "$j" ] && out="${out:+$out,}$j"; done
  echo "$out"
}

# ------------------------------------------------------------------- redis

ensure_redis_installed() {
  command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 && return 0
  log "redis-server not found; installing it with apt-get (Debian package redis-server)"
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "redis-server is missing and we are not root; install it: apt-get install -y redis-server"
    sudo="sudo"
  fi
  local logf="$RUN/apt-redis.log"
  if ! { $sudo apt-get update && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends redis-server; } </dev/null >"$logf" 2>&1 9>&-; then
    tail_log "$logf" 20
    die "apt-get install redis-server failed (full log: $logf)"
  fi
  command -v redis-server >/dev/null 2>&1 || die "apt-get installed redis-server but it is not on PATH"
}

redis_running() { pid_matches "$RRUN/redis.pid" "$HOST:$REDIS_PORT"; }
redis_ping() { [ "$(redis-cli -h "$HOST" -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; }

start_redis() {
  mkdir -p "$RRUN"
  if redis_running && redis_ping; then
    return 0
  fi
  if port_open "$REDIS_PORT"; then
    die "port $REDIS_PORT is taken by a process this script did not start; stop it first"
  fi
  rm -f "$RRUN/redis.pid"
  redis-server --bind "$HOST" --port "$REDIS_PORT" --protected-mode yes \
    --daemonize yes --pidfile "$RRUN/redis.pid" --logfile "$RRUN/redis.log" \
    --dir "$RRUN" --save "" --appendonly no \
    </dev/null >"$RRUN/start.log" 2>&1 9>&- || { tail_log "$RRUN/start.log"; die "redis-server did not start"; }
  local i
  for i in $(seq 1 100); do  # 10 s
    redis_ping && return 0
    sleep 0.1
  done
  tail_log "$RRUN/redis.log"
  die "redis-server on $HOST:$REDIS_PORT did not answer PING within 10s"
}

stop_redis() {
  if redis_running; then
    local pid; pid="$(cat "$RRUN/redis.pid")"
    redis-cli -h "$HOST" -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
    wait_gone "$pid" 10 || kill -9 "$pid" 2>/dev/null || true
    log "stopped redis (pid $pid)"
  fi
  rm -f "$RRUN/redis.pid"
}

# ------------------------------------------------------------------- kafka

write_kafka_config() {  # write_kafka_config NODE N
  local i="$1" n="$2" d voters="" j rf minisr
  d="$(node_dir "$i")"
  for j in $(seq 1 "$n"); do voters="${voters:+$voters,}$j@$HOST:$(controller_port "$j")"; done
  if [ "$n" -ge 3 ]; then rf=3; minisr=2; else rf=1; minisr=1; fi
  mkdir -p "$d/data" "$d/logs"
  {
    echo "# Written by deploy/local/services.sh; rewritten on every start (Kafka $KAFKA_VERSION, $KAFKA_MODE)."
    if [ "$KAFKA_MODE" = zk ]; then
      cat <<EOF
broker.id=$i
zookeeper.connect=$HOST:$ZK_PORT/replmon
listeners=PLAINTEXT://$HOST:$(broker_port "$i")
EOF
      if [ -n "${REPLMON_KAFKA_IBP:-}" ]; then echo "inter.broker.protocol.version=$REPLMON_KAFKA_IBP"; fi
    else
      cat <<EOF
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$voters
listeners=PLAINTEXT://$HOST:$(broker_port "$i"),CONTROLLER://$HOST:$(controller_port "$i")$(secured_listeners "$i")
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT$(secured && echo ",SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL")
EOF
    fi
    if [ "$LOG4J1" = 0 ]; then  # 4.x: share groups' state topic
      echo "share.coordinator.state.topic.replication.factor=$rf"
      echo "share.coordinator.state.topic.min.isr=$minisr"
    fi
  } >"$d/server.properties"
  cat >>"$d/server.properties" <<EOF
advertised.listeners=PLAINTEXT://$HOST:$(broker_port "$i")$(secured_listeners "$i")
inter.broker.listener.name=PLAINTEXT
log.dirs=$d/data
num.network.threads=2
num.io.threads=4
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=$minisr
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=5
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$minisr
transaction.state.log.num.partitions=5
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
log.retention.hours=24
EOF
  if secured; then security_config >>"$d/server.properties"; fi
  local extra_var="REPLMON_KAFKA_NODE_PROPS_$i"
  {
    if [ -n "${REPLMON_REPLICA_LAG_TIME_MAX_MS:-}" ]; then echo "replica.lag.time.max.ms=$REPLMON_REPLICA_LAG_TIME_MAX_MS"; fi
    if [ -n "${REPLMON_BROKER_SESSION_TIMEOUT_MS:-}" ]; then echo "broker.session.timeout.ms=$REPLMON_BROKER_SESSION_TIMEOUT_MS"; fi
    if [ -n "${!extra_var:-}" ]; then tr ';' '\n' <<<"${!extra_var}"; fi
  } >>"$d/server.properties"
  # log4j2 (4.x) or log4j 1.x (3.x): the local config, plus the request-log fragment when
  # asked (later keys win).
  local l4j=log4j2
  [ "$LOG4J1" = 1 ] && l4j=log4j
  cat "$HERE/$l4j.properties" >"$d/$l4j.properties"
  if [ "$(request_log_on "$n")" = 1 ]; then
    cat "${REPLMON_REQUEST_LOG_FRAGMENT:-$HERE/../kafka/$l4j-request-log.properties}" >>"$d/$l4j.properties"
  fi
}

secured_listeners() {  # secured_listeners NODE: ",SASL_PLAINTEXT://...,SSL://...,SASL_SSL://..." or nothing
  if secured; then
    echo ",SASL_PLAINTEXT://$HOST:$(sasl_port "$1"),SSL://$HOST:$(ssl_port "$1"),SASL_SSL://$HOST:$(sasl_ssl_port "$1")"
  fi
}

security_config() {  # the server.properties lines of the secured listeners
  local pw
  pw="$(cat "$SECURITY_DIR/keystore-password")"
  cat <<EOF
# --security: SCRAM-SHA-512 on the SASL listeners (the users live in the cluster metadata);
# TLS with the local CA's certificate; clients need no certificate of their own.
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PKCS12
ssl.keystore.location=$SECURITY_DIR/broker.p12
ssl.keystore.password=$pw
ssl.key.password=$pw
ssl.client.auth=none
EOF
}

keytool_q() {  # keytool_q ARGS...: keytool, quiet unless it fails
  keytool "$@" >>"$SECURITY_DIR/keytool.log" 2>&1 || { tail_log "$SECURITY_DIR/keytool.log" 20; die "keytool $1 failed"; }
}

make_security() {  # the SCRAM user and password, the TLS keys (a CA, the brokers' certificate it signs)
  command -v keytool >/dev/null 2>&1 || die "--security needs keytool (it comes with the JDK 17)"
  rm -rf "$SECURITY_DIR"; mkdir -p "$SECURITY_DIR"; chmod 700 "$SECURITY_DIR"
  local pw d="$SECURITY_DIR"
  pw="$("$PY" -c 'import secrets; print(secrets.token_urlsafe(18))')"
  echo "$pw" >"$d/keystore-password"
  keytool_q -genkeypair -alias ca -dname "CN=replmon local CA" -ext bc:c -keyalg RSA -keysize 2048 \
    -validity 3650 -keystore "$d/ca.p12" -storetype PKCS12 -storepass "$pw"
  keytool_q -exportcert -rfc -alias ca -keystore "$d/ca.p12" -storepass "$pw" -file "$d/ca.pem"
  keytool_q -genkeypair -alias broker -dname "CN=localhost" -keyalg RSA -keysize 2048 -validity 3650 \
    -keystore "$d/broker.p12" -storetype PKCS12 -storepass "$pw"
  keytool_q -certreq -alias broker -keystore "$d/broker.p12" -storepass "$pw" -file "$d/broker.csr"
  keytool_q -gencert -alias ca -keystore "$d/ca.p12" -storepass "$pw" -infile "$d/broker.csr" -rfc \
    -outfile "$d/broker.pem" -ext "SAN=IP:$HOST,DNS:localhost" -validity 3650
  keytool_q -importcert -noprompt -alias ca -keystore "$d/broker.p12" -storepass "$pw" -file "$d/ca.pem"
  keytool_q -importcert -alias broker -keystore "$d/broker.p12" -storepass "$pw" -file "$d/broker.pem"
  echo replmon >"$d/scram-user"
  "$PY" -c 'import secrets; print(secrets.token_urlsafe(18))' >"$d/scram-password"  # last: secured() looks for it
}

request_log_on() {  # request_log_on N: 1 when the brokers write the request log
  local dflt=0
  if [ "$1" -ge 3 ]; then dflt=1; fi
  echo "${REPLMON_REQUEST_LOG:-$dflt}"
}

run_java() {  # run_java NODE MAINCLASS ARGS...: exec a JVM for a Kafka node
  local i="$1"; shift
  local d heap
  d="$(node_dir "$i")"
  read -r -a heap <<<"$HEAP"
  exec java "${heap[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
    -Djava.awt.headless=true -Dkafka.logs.dir="$d/logs" \
    -Dlog4j2.configurationFile="$d/log4j2.properties" -Dlog4j.configuration="file:$d/log4j.properties" \
    -cp "$KAFKA_LIBS/*" "$@"
}

cluster_kind() { echo "$KAFKA_VERSION $KAFKA_MODE"; }  # what $KRUN/kind records

format_kafka() {  # format_kafka N SECURITY(0|1): fresh storage for an N-node cluster
  local n="$1" security="${2:-0}" i cluster_id d scram=()
  rm -rf "$KRUN"; mkdir -p "$KRUN"
  if [ "$KAFKA_MODE" = zk ]; then  # the brokers register in a new ZooKeeper; nothing to format
    [ "$security" = 1 ] && die "--security is for KRaft clusters (REPLMON_KAFKA_MODE=zk has none)"
    for i in $(seq 1 "$n"); do write_kafka_config "$i" "$n"; done
    echo zk >"$KRUN/cluster-id"
    echo "$n" >"$KRUN/brokers"
    cluster_kind >"$KRUN/kind"
    log "set up a new $n-broker ZooKeeper-mode cluster (Kafka $KAFKA_VERSION) in $KRUN"
    return 0
  fi
  if [ "$security" = 1 ]; then
    make_security
    # Kafka's own tool creates the user, in the metadata every node starts from.
    scram=(--add-scram "SCRAM-SHA-512=[name=$(cat "$SECURITY_DIR/scram-user"),password=$(cat "$SECURITY_DIR/scram-password")]")
  fi
  # --cluster-id=ID: a base64url id may start with "-", which "-t ID" would take for an option.
  cluster_id="$("$PY" -c 'import base64, uuid; print(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))')"
  for i in $(seq 1 "$n"); do
    write_kafka_config "$i" "$n"
    d="$(node_dir "$i")"
    if ! (run_java "$i" kafka.tools.StorageTool format --cluster-id="$cluster_id" -c "$d/server.properties" "${scram[@]}") \
        >"$d/logs/format.log" 2>&1; then
      tail_log "$d/logs/format.log" 20
      die "formatting KRaft storage for node $i failed"
    fi
  done
  echo "$cluster_id" >"$KRUN/cluster-id"
  echo "$n" >"$KRUN/brokers"
  cluster_kind >"$KRUN/kind"
  log "formatted a new $n-node KRaft cluster ($cluster_id, Kafka $KAFKA_VERSION) in $KRUN$(secured && echo ", with secured listeners")"
}

start_kafka() {  # start_kafka N SECURITY(0|1)
  local n="$1" security="$2" i d pids="" started=0 have
  have="$(configured_brokers)"
  local any_running=0
  for i in $(seq 1 "$have"); do kafka_running "$i" && any_running=1; done
  if [ "$any_running" = 1 ] && [ "$have" != "$n" ]; then
    die "a $have-broker Kafka cluster is running; run '$0 down' before 'up --brokers $n'"
  fi
  # A run dir from before $KRUN/kind was written holds the pom's version in KRaft mode.
  local kind
  kind="$(cat "$KRUN/kind" 2>/dev/null || echo "$POM_KAFKA_VERSION kraft")"
  if [ "$any_running" = 1 ] && [ "$kind" != "$(cluster_kind)" ]; then
    die "a Kafka $kind cluster is running; run '$0 down' before 'up' with Kafka $(cluster_kind)"
  fi
  if [ "$any_running" = 1 ] && [ "$security" = 1 ] && ! secured; then
    die "a Kafka cluster without secured listeners is running; run '$0 down' before 'up --security'"
  fi
  if [ "$have" != "$n" ] || [ ! -s "$KRUN/cluster-id" ] || [ "$kind" != "$(cluster_kind)" ] \
      || { [ "$security" = 1 ] && ! secured; }; then
    format_kafka "$n" "$security"
  fi
  if [ "$KAFKA_MODE" = zk ]; then start_zookeeper; fi
  for i in $(seq 1 "$n"); do
    d="$(node_dir "$i")"
    if kafka_running "$i"; then
      pids="${pids:+$pids,}$(cat "$(kafka_pidfile "$i")")"
      continue
    fi
    local p
    local ports=("$(broker_port "$i")")
    if [ "$KAFKA_MODE" = kraft ]; then ports+=("$(controller_port "$i")"); fi
    for p in "${ports[@]}"; do
      port_open "$p" && die "port $p is taken by a process this script did not start; stop it first"
    done
    write_kafka_config "$i" "$n"
    echo "===== start $(date -u +%FT%TZ) =====" >>"$d/logs/stdout.log"
    # Its own session (setsid), so the node outlives the shell (or pytest)
    # that ran up and gets no signal meant for it. The subshell writes its
    # own pid, which exec hands on to the JVM.
    rm -f "$(kafka_pidfile "$i")"
    # shellcheck disable=SC2016  # $$ and "$@" belong to the inner shell
    setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$(kafka_pidfile "$i")" \
      "$HERE/services.sh" __run_java "$i" kafka.Kafka "$d/server.properties" \
      </dev/null >>"$d/logs/stdout.log" 2>&1 9>&- &
    for _ in $(seq 1 50); do [ -s "$(kafka_pidfile "$i")" ] && break; sleep 0.1; done
    [ -s "$(kafka_pidfile "$i")" ] || die "Kafka node $i did not start (no pid file)"
    pids="${pids:+$pids,}$(cat "$(kafka_pidfile "$i")")"
    started=$((started + 1))
  done
  local what="Kafka"
  [ "$started" -gt 0 ] && log "started $started of $n Kafka node(s); waiting up to ${TIMEOUT}s for $(bootstrap_for "$n")"
  local out rc=0
  out="$("$PY" "$HERE/probe.py" --bootstrap "$(bootstrap_for "$n")" --brokers "$n" \
        --timeout "$TIMEOUT" --pids "$pids")" || rc=$?
  if [ "$rc" != 0 ]; then
    echo "services: $what: $out" >&2
    for i in $(seq 1 "$n"); do
      tail_log "$(node_dir "$i")/logs/stdout.log" 10  # JVM errors land here
      tail_log "$(node_dir "$i")/logs/server.log" 30
    done
    case "$rc" in
      2) die "Kafka exited while starting (logs above; all under $KRUN)" ;;
      3) die "the probe needs kafka-python: pip install kafka-python, or set REPLMON_PYTHON" ;;
      4) die "the readiness probe $HERE/probe.py failed (message above)" ;;
      *) die "Kafka did not answer on $(bootstrap_for "$n") within ${TIMEOUT}s (logs above; all under $KRUN)" ;;
    esac
  fi
  log "Kafka $out"
}

wait_gone() {  # wait_gone PID SECONDS
  local pid="$1" i
  for i in $(seq 1 $(($2 * 10))); do
    kill -0 "$pid" 2>/dev/null || return 0
    [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] && return 0
    sleep 0.1
  done
  return 1
}

stop_kafka() {
  local n i pid pids=""
  n="$(configured_brokers)"
  for i in $(seq 1 "$n"); do
    if kafka_running "$i"; then
      pid="$(cat "$(kafka_pidfile "$i")")"
      kill "$pid" 2>/dev/null || true
      pids="$pids $pid"
    fi
    rm -f "$(kafka_pidfile "$i")"
  done
  for pid in $pids; do
    if ! wait_gone "$pid" 30; then
      log "Kafka pid $pid did not stop within 30s; killing it"
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  [ -n "$pids" ] && log "stopped Kafka (pid(s)$pids)"
  stop_zookeeper
  return 0
}

# ----------------------------------------------- zookeeper (3.x, REPLMON_KAFKA_MODE=zk)

zrun() { echo "$KRUN/zookeeper"; }
zk_running() { pid_matches "$(zrun)/zk.pid" "$(zrun)/zookeeper.properties"; }

start_zookeeper() {  # the ZooKeeper server in the broker jars (zookeeper-server-start.sh's class)
  local z; z="$(zrun)"
  mkdir -p "$z/data" "$z/logs"
  zk_running && return 0
  port_open "$ZK_PORT" && die "port $ZK_PORT is taken by a process this script did not start; stop it first"
  cat >"$z/zookeeper.properties" <<EOF
dataDir=$z/data
clientPortAddress=$HOST
clientPort=$ZK_PORT
maxClientCnxns=0
admin.enableServer=false
EOF
  printf '%s\n' "log4j.rootLogger=INFO, F" "log4j.appender.F=org.apache.log4j.FileAppender" \
    "log4j.appender.F.File=$z/logs/zookeeper.log" "log4j.appender.F.layout=org.apache.log4j.PatternLayout" \
    "log4j.appender.F.layout.ConversionPattern=[%d] %p %m (%c)%n" >"$z/log4j.properties"
  rm -f "$z/zk.pid"
  local heap; read -r -a heap <<<"${REPLMON_KAFKA_HEAP:--Xms64m -Xmx256m}"
  # shellcheck disable=SC2016  # $$ and "$@" belong to the inner shell
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$z/zk.pid" \
    java "${heap[@]}" -Dlog4j.configuration="file:$z/log4j.properties" -cp "$KAFKA_LIBS/*" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$z/zookeeper.properties" \
    </dev/null >>"$z/logs/stdout.log" 2>&1 9>&- &
  local i
  for i in $(seq 1 300); do  # 30 s
    port_open "$ZK_PORT" && { log "ZooKeeper up on $HOST:$ZK_PORT (pid $(cat "$z/zk.pid"))"; return 0; }
    sleep 0.1
  done
  tail_log "$z/logs/stdout.log"; tail_log "$z/logs/zookeeper.log"
  die "ZooKeeper did not listen on $HOST:$ZK_PORT within 30s"
}

stop_zookeeper() {
  local z pid; z="$(zrun)"
  if ! zk_running; then rm -f "$z/zk.pid"; return 0; fi
  pid="$(cat "$z/zk.pid")"
  kill "$pid" 2>/dev/null || true
  wait_gone "$pid" 20 || kill -9 "$pid" 2>/dev/null || true
  rm -f "$z/zk.pid"
  log "stopped ZooKeeper (pid $pid)"
}

# --------------------------------------------------------------- commands

write_env() {  # write_env N
  local n="$1" tmp="$RUN/env.tmp" jars spark_kafka_version
  jars="$(spark_jar_list)"
  spark_kafka_version="$(sed -n 's/^spark_sql_kafka=//p' "$SPARK_JARS/.complete" 2>/dev/null)"
  {
    echo "REPLMON_KAFKA_BOOTSTRAP=$(bootstrap_for "$n")"
    echo "REPLMON_REDIS_URL=redis://$HOST:$REDIS_PORT/0"
    echo "REPLMON_SPARK_JARS=$jars"
    echo "REPLMON_KAFKA_BROKERS=$n"
    echo "REPLMON_KAFKA_VERSION=$(sed -n 's/^kafka=//p' "$KAFKA_LIBS/.complete" 2>/dev/null)"
    echo "REPLMON_KAFKA_MODE=$KAFKA_MODE"
    echo "REPLMON_SPARK_KAFKA_VERSION=$spark_kafka_version"
    echo "REPLMON_KAFKA_RUN=$KRUN"
    echo "REPLMON_REQUEST_LOG=$(request_log_on "$n")"
    if secured; then
      echo "REPLMON_KAFKA_SASL_BOOTSTRAP=$(bootstrap_for "$n" sasl_port)"
      echo "REPLMON_KAFKA_SSL_BOOTSTRAP=$(bootstrap_for "$n" ssl_port)"
      echo "REPLMON_KAFKA_SASL_SSL_BOOTSTRAP=$(bootstrap_for "$n" sasl_ssl_port)"
      echo "REPLMON_KAFKA_SCRAM_USER=$(cat "$SECURITY_DIR/scram-user")"
      echo "REPLMON_KAFKA_SCRAM_PASSWORD=$(cat "$SECURITY_DIR/scram-password")"
      echo "REPLMON_KAFKA_TLS_CA=$SECURITY_DIR/ca.pem"
    fi
  } >"$tmp"
  mv "$tmp" "$RUN/env"
}

cmd_up() {
  local n=1 spark=0 security=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --spark) spark=1; shift ;;
      --security) security=1; shift ;;
      --brokers) [ $# -ge 2 ] || die "--brokers needs a value (1 or 3)"; n="$2"; shift 2 ;;
      --brokers=*) n="${1#*=}"; shift ;;
      --alertmanager) REPLMON_SERVICES_ALERTMANAGER=1; shift ;;  # opt-in: deploy/local/alertmanager.sh
      *) die "unknown argument to up: $1" ;;
    esac
  done
  case "$n" in 1|3) ;; *) die "--brokers must be 1 or 3, not '$n'" ;; esac
  command -v java >/dev/null 2>&1 || die "java not found; install a JDK 17 (apt-get install -y openjdk-17-jdk-headless)"
  "$PY" -c 'import kafka' 2>/dev/null || die "'$PY' cannot import kafka-python (pip install kafka-python, or set REPLMON_PYTHON)"
  mkdir -p "$RUN"
  ensure_redis_installed
  "$HERE/fetch-jars.sh"
  start_kafka "$n" "$security"
  start_redis
  write_env "$n"
  if [ "$spark" = 1 ]; then "$HERE/spark-cluster.sh" up 9>&-; fi
  log "up: Kafka $(bootstrap_for "$n"), Redis $HOST:$REDIS_PORT; env in $RUN/env"
  if [ "${REPLMON_SERVICES_ALERTMANAGER:-0}" = 1 ]; then "$HERE/alertmanager.sh" up 9>&- >>"$RUN/env"; fi
}

cmd_down() {
  "$HERE/alertmanager.sh" down 9>&-
  "$HERE/spark-cluster.sh" down 9>&-
  stop_kafka
  stop_redis
  rm -f "$RUN/env"
}

cmd_status() {
  local n i ok=0
  n="$(configured_brokers)"
  if [ "$n" = 0 ]; then
    echo "kafka: not set up (no cluster formatted under $KRUN)"; ok=1
  else
    echo "kafka: $n-node cluster $(cat "$KRUN/cluster-id" 2>/dev/null), Kafka $(cat "$KRUN/kind" 2>/dev/null || echo "$POM_KAFKA_VERSION kraft")"
    for i in $(seq 1 "$n"); do
      if kafka_running "$i"; then
        echo "  node $i: running, pid $(cat "$(kafka_pidfile "$i")"), broker $HOST:$(broker_port "$i"), controller $HOST:$(controller_port "$i"), log $(node_dir "$i")/logs/server.log"
      else
        echo "  node $i: stopped"; ok=1
      fi
    done
  fi
  if redis_running; then
    local state="not answering PING"
    redis_ping && state="PONG"
    echo "redis: running, pid $(cat "$RRUN/redis.pid"), $HOST:$REDIS_PORT ($state), log $RRUN/redis.log"
    [ "$state" = PONG ] || ok=1
  else
    echo "redis: stopped"; ok=1
  fi
  if [ -f "$RUN/env" ]; then echo "env: $RUN/env"; else echo "env: none (run up)"; fi
  [ -f "$RUN/spark/env" ] && { "$HERE/spark-cluster.sh" status || ok=1; }
  return "$ok"
}

cmd_clean() {
  cmd_down
  rm -rf "$RUN"
  log "removed $RUN"
}

# up, down and clean take a lock, so two callers at once (parallel test
# workers, say) do not both format or start a cluster: the second waits, then
# finds everything running. Whatever outlives this script (the JVMs, redis,
# a daemon apt might start) is launched with fd 9 closed, or it would keep
# holding the lock.
lock() {
  mkdir -p "$RUN"
  exec 9>"$RUN/.lock"
  flock -w 900 9 || die "another services.sh has held $RUN/.lock for 15 minutes"
}

case "${1:-}" in
  up) shift; lock; cmd_up "$@" ;;
  down) shift; lock; cmd_down ;;  # arguments (say --brokers N) are ignored
  status) shift; cmd_status ;;
  clean) shift; lock; cmd_clean ;;
  __run_java) shift; run_java "$@" ;;  # internal: used by start_kafka
  -h|--help|help) sed -n '2,/^set -euo/{/^set -euo/!p}' "$0" ;;
  *) echo "usage: $0 up [--brokers 1|3] [--alertmanager] [--spark] [--security] | down | status | clean" >&2; exit 2 ;;
esac
