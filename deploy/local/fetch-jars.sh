#!/usr/bin/env bash
# Fetch the jars the local services and Spark's Kafka source need, from Maven
# Central through the local ~/.m2 cache:
#
#   deploy/local/kafka-libs/  the Kafka broker (deploy/kafka/pom.xml)
#   deploy/local/kafka-libs-<version>/
#                             another Kafka version, when REPLMON_KAFKA_VERSION names one
#                             (3.x with reload4j for log4j 1.x, as Kafka 3.x ships)
#   deploy/local/jars/        spark-sql-kafka-0-10 and the run-time jars it needs
#                             that pyspark/jars lacks (deploy/spark/pom.xml)
#
# Usage: deploy/local/fetch-jars.sh [--force] [--kafka-only|--spark-only]
#
# Quick when both folders are already complete (a .complete marker written
# last records what was fetched, and from which pom). Both folders are
# git-ignored.
#
# Environment:
#   REPLMON_PYTHON              interpreter whose pyspark decides the Spark
#                               version (default: the repo's .venv if there is
#                               one, else python3)
#   REPLMON_SPARK_KAFKA_VERSION fetch this spark-sql-kafka version instead of
#                               the installed pyspark's
#   REPLMON_KAFKA_VERSION       fetch this Kafka version into kafka-libs-<version> (default:
#                               the pom's, into kafka-libs); services.sh starts it
#   MVN                         maven command (default: mvn)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${REPLMON_PYTHON:-}"  # the project's interpreter (services.sh passes its choice)
if [ -z "$PY" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi
fi
MVN="${MVN:-mvn}"
KAFKA_POM="$ROOT/deploy/kafka/pom.xml"
SPARK_POM="$ROOT/deploy/spark/pom.xml"
KAFKA_VERSION="${REPLMON_KAFKA_VERSION:-}"
case "$KAFKA_VERSION" in
  ""|[0-9]*.[0-9]*.[0-9]*) ;;
  *) echo "fetch-jars: ERROR: REPLMON_KAFKA_VERSION must look like 3.9.1, not '$KAFKA_VERSION'" >&2; exit 2 ;;
esac
# The pom's own version is the default one, in kafka-libs/.
[ "$KAFKA_VERSION" = "$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$ROOT/deploy/kafka/pom.xml")" ] && KAFKA_VERSION=""
KAFKA_LIBS="$HERE/kafka-libs${KAFKA_VERSION:+-$KAFKA_VERSION}"
SPARK_JARS="$HERE/jars"

# Used only when the installed pyspark's own version of spark-sql-kafka is not
# on Maven Central. Seen on 2026-11-22: pyspark 4.3.0 is on PyPI but no Spark
# 4.3.0 artifact is on Maven Central; spark-sql-kafka-0-10_2.13 is there up to
# 4.2.0, and spark-token-provider-kafka-0-10_2.13 only up to 4.0.0 (its 4.1.x
# and 4.2.0 jars are missing). 4.2.0 + 4.0.0 was checked by hand against
# pyspark 4.3.0 (a streaming read and a batch write through the local broker).
FALLBACK_SPARK_KAFKA_VERSION=4.2.0
FALLBACK_TOKEN_PROVIDER_VERSION=4.0.0

force=0 do_kafka=1 do_spark=1
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --kafka-only) do_spark=0 ;;
    --spark-only) do_kafka=0 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "fetch-jars.sh: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

log() { echo "fetch-jars: $*" >&2; }
die() { echo "fetch-jars: ERROR: $*" >&2; exit 1; }

command -v "$MVN" >/dev/null 2>&1 || die "maven ('$MVN') not found; install it (apt-get install -y maven)"
command -v java >/dev/null 2>&1 || die "java not found; install a JDK 17 (apt-get install -y openjdk-17-jdk-headless)"

sha() { sha256sum "$1" | cut -c1-16; }

# run_mvn POM OUTDIR LOGFILE [-Dprop=value ...]: copy runtime deps into OUTDIR.
# Two tries, since a transfer can fail once on a busy network.
run_mvn() {
  local pom="$1" out="$2" logf="$3"; shift 3
  local try
  for try in 1 2; do
    rm -rf "$out"
    if "$MVN" -q -B -f "$pom" dependency:copy-dependencies \
        -DoutputDirectory="$out" "$@" >"$logf" 2>&1; then
      return 0
    fi
    # A missing artifact will not appear on a second try.
    grep -qE "Could not find artifact|was not found in" "$logf" && return 1
    [ "$try" = 1 ] && log "maven failed, retrying once (see $logf)"
  done
  return 1
}

mvn_error() { grep -m3 -E '\[ERROR\]' "$1" | sed 's/\x1b\[[0-9;]*m//g' >&2 || tail -n 20 "$1" >&2; }

fetch_kafka() {
  local marker="$KAFKA_LIBS/.complete" want props=()
  want="pom=$(sha "$KAFKA_POM")"
  if [ -n "$KAFKA_VERSION" ]; then
    want="$want version=$KAFKA_VERSION"
    props+=("-Dkafka.version=$KAFKA_VERSION")
    case "$KAFKA_VERSION" in 0.*|1.*|2.*|3.*) props+=(-Dlog4j1) ;; esac
  fi
  if [ "$force" = 0 ] && [ -f "$marker" ] && grep -qx "$want" "$marker"; then
    return 0
  fi
  log "fetching the Kafka broker jars into $KAFKA_LIBS (first time: maven downloads into ~/.m2)"
  local tmp="$HERE/.run/fetch/$(basename "$KAFKA_LIBS")" logf
  mkdir -p "$HERE/.run/fetch"; logf="$(mktemp "$HERE/.run/fetch/mvn.XXXXXX.log")"
  if ! run_mvn "$KAFKA_POM" "$tmp" "$logf" "${props[@]}"; then
    mvn_error "$logf"
    die "could not fetch the Kafka jars with $KAFKA_POM (full maven output: $logf)"
  fi
  ls "$tmp"/kafka_2.13-*.jar >/dev/null 2>&1 || die "maven ran but no kafka_2.13 jar landed in $tmp"
  { echo "$want"
    echo "kafka=$(basename "$tmp"/kafka_2.13-*.jar .jar | sed 's/^kafka_2.13-//')"
  } >"$tmp/.complete"
  rm -rf "$KAFKA_LIBS"; mv "$tmp" "$KAFKA_LIBS"; rm -f "$logf"
  log "Kafka $(sed -n 's/^kafka=//p' "$KAFKA_LIBS/.complete"): $(ls "$KAFKA_LIBS" | wc -l) jars"
}

fetch_spark() {
  local pyspark_version pyspark_jars
  pyspark_version="$("$PY" -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null)" \
    || die "'$PY' cannot import pyspark (set REPLMON_PYTHON to the project's interpreter)"
  pyspark_jars="$("$PY" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
  [ -d "$pyspark_jars" ] || die "pyspark has no jars folder at $pyspark_jars"

  local wanted="${REPLMON_SPARK_KAFKA_VERSION:-$pyspark_version}"
  local marker="$SPARK_JARS/.complete" key
  key="pom=$(sha "$SPARK_POM") pyspark=$pyspark_version wanted=$wanted"
  if [ "$force" = 0 ] && [ -f "$marker" ] && grep -qx "$key" "$marker"; then
    return 0
  fi

  log "fetching spark-sql-kafka-0-10 $wanted for pyspark $pyspark_version into $SPARK_JARS"
  local tmp="$HERE/.run/fetch/jars" logf spark_v token_v exact
  mkdir -p "$HERE/.run/fetch"; logf="$(mktemp "$HERE/.run/fetch/mvn.XXXXXX.log")"
  spark_v="$wanted"; token_v="$wanted"
  if ! run_mvn "$SPARK_POM" "$tmp" "$logf" -Dspark.version="$spark_v"; then
    if grep -qE "Could not find artifact|was not found in" "$logf" && [ -z "${REPLMON_SPARK_KAFKA_VERSION:-}" ]; then
      log "WARNING: $(grep -m1 -oE "Could not find artifact [^ ]+|[^ ]+ was not found" "$logf" | head -1)"
      log "WARNING: spark-sql-kafka $wanted is not on Maven Central; falling back to" \
          "spark-sql-kafka $FALLBACK_SPARK_KAFKA_VERSION + spark-token-provider" \
          "$FALLBACK_TOKEN_PROVIDER_VERSION (run with --force once $wanted is published)"
      spark_v="$FALLBACK_SPARK_KAFKA_VERSION"; token_v="$FALLBACK_TOKEN_PROVIDER_VERSION"
      if ! run_mvn "$SPARK_POM" "$tmp" "$logf" -Dspark.version="$spark_v" \
          -Dspark.token.provider.version="$token_v"; then
        mvn_error "$logf"
        die "could not fetch the fallback Spark Kafka jars either (full maven output: $logf)"
      fi
    else
      mvn_error "$logf"
      die "could not fetch spark-sql-kafka $wanted with $SPARK_POM (full maven output: $logf)"
    fi
  fi

  # Drop anything pyspark/jars already ships (same artifact, any version): a
  # second copy on the class path would shadow or clash with pyspark's.
  local jar name
  for jar in "$tmp"/*.jar; do
    name="$(basename "$jar" .jar | sed -E 's/-[0-9][0-9A-Za-z.+_-]*$//')"
    if compgen -G "$pyspark_jars/$name-[0-9]*.jar" >/dev/null; then
      log "dropping $(basename "$jar"): pyspark/jars already has $(basename "$(compgen -G "$pyspark_jars/$name-[0-9]*.jar" | head -1)")"
      rm -f "$jar"
    fi
  done
  for name in spark-sql-kafka-0-10_2.13 spark-token-provider-kafka-0-10_2.13 kafka-clients commons-pool2; do
    compgen -G "$tmp/$name-[0-9]*.jar" >/dev/null || die "no $name jar after fetching (see $logf)"
  done
  exact=false
  [ "$spark_v" = "$pyspark_version" ] && [ "$token_v" = "$pyspark_version" ] && exact=true
  { echo "$key"
    echo "pyspark=$pyspark_version"
    echo "spark_sql_kafka=$spark_v"
    echo "spark_token_provider=$token_v"
    echo "exact=$exact"
  } >"$tmp/.complete"
  rm -rf "$SPARK_JARS"; mv "$tmp" "$SPARK_JARS"; rm -f "$logf"
  log "Spark Kafka jars: $(cd "$SPARK_JARS" && ls *.jar | tr '\n' ' ')"
}

[ "$do_kafka" = 1 ] && fetch_kafka
[ "$do_spark" = 1 ] && fetch_spark
exit 0
