#!/usr/bin/env bash
# kafka.sh: a real Apache Kafka 4.4.0 broker (KRaft, no ZooKeeper) without Docker.
#
# Needs Java 17+ and, the first time only, Maven (`mvn`) with access to Maven
# Central: the broker and tools jars are fetched with Maven and cached.
#
# Usage:
#   scripts/kafka.sh start [--brokers N] [--sasl]
#                                          start N (1 or 3) broker+controller nodes in the background;
#                                          --sasl: clients must authenticate (SASL_PLAINTEXT, PLAIN and
#                                          SCRAM-SHA-512, user kwal, password $KWAL_KAFKA_SASL_PASSWORD);
#                                          --tls: clients connect with TLS (a CA and certificates made
#                                          with openssl for the run in $KWAL_KAFKA_HOME/tls: ca.pem,
#                                          client.pem, client.key); --mtls: and must present a client
#                                          certificate signed by that CA.
#                                          The topics, perf and leader commands speak neither.
#   scripts/kafka.sh stop [--keep]         stop them (SIGTERM, then SIGKILL after 30 s) and delete the
#                                          state dir unless --keep
#   scripts/kafka.sh status                is it running? (exit 0 if every node is up, 1 otherwise)
#   scripts/kafka.sh logs [-f] [-n LINES] [--node ID]
#                                          tail the broker log(s)
#   scripts/kafka.sh perf [ARGS...]        Kafka's own ProducerPerformance against the running cluster on a
#                                          fresh topic (default 200000 records x 1024 bytes, acks=all);
#                                          ARGS are passed through (e.g. --num-records 50000, --topic T,
#                                          --command-property acks=1 linger.ms=5 replaces acks=all)
#   scripts/kafka.sh topics [ARGS...]      org.apache.kafka.tools.TopicCommand with --bootstrap-server set
#   scripts/kafka.sh node ACTION ID        act on one node of a running cluster (fault tests):
#                                          kill (SIGKILL), stop (SIGTERM, wait), start (wait until ready),
#                                          pause (SIGSTOP), resume (SIGCONT), pid (print its PID)
#   scripts/kafka.sh leader TOPIC [PART]   print the node ID leading a partition (default 0)
#   scripts/kafka.sh fetch                 only download the jars into the cache
#   scripts/kafka.sh classpath             print the Java classpath (broker + tools + log4j2)
#
# Ports: node i (1-based) listens for clients on 127.0.0.1:(BASE + 2(i-1)) and for the controller quorum
# on 127.0.0.1:(BASE + 2(i-1) + 1), BASE = $KWAL_KAFKA_PORT (default 9092): one node 9092/9093, three
# nodes 9092/9093, 9094/9095, 9096/9097.
#
# Environment:
#   KWAL_KAFKA_CACHE      jar cache (default $HOME/.cache/kwal/kafka-4.4.0)
#   KWAL_KAFKA_HOME       state dir: configs, data, logs, PIDs (default /tmp/kwal-kafka)
#   KWAL_KAFKA_PORT       first client port (default 9092)
#   KWAL_KAFKA_M2         Maven local repository to use (default: Maven's own, ~/.m2/repository)
#   KWAL_KAFKA_HEAP_OPTS  broker heap (default "-Xms256m -Xmx1g")
#   KWAL_KAFKA_JAVA_OPTS  extra JVM options for the brokers
#   KWAL_KAFKA_WAIT       seconds to wait for the cluster to be ready (default 120)
#   KWAL_KAFKA_SASL_PASSWORD  the password of SASL user kwal with --sasl (default kwal-secret)
#   JAVA_HOME             Java to use (default: java on PATH)
set -euo pipefail

readonly KAFKA_VERSION=4.4.0
readonly SCALA_VERSION=2.13
# log4j2 runtime: the kafka_2.13 POM brings no SLF4J binding; Kafka 4.x uses slf4j-api 1.7.x, so the
# binding is log4j-slf4j-impl (not log4j-slf4j2-impl). Same version as Kafka's own log4j-core.
readonly LOG4J_VERSION=2.25.5

CACHE=${KWAL_KAFKA_CACHE:-${HOME:-/tmp}/.cache/kwal/kafka-$KAFKA_VERSION}
STATE=${KWAL_KAFKA_HOME:-/tmp/kwal-kafka}
BASE_PORT=${KWAL_KAFKA_PORT:-9092}
HEAP_OPTS=${KWAL_KAFKA_HEAP_OPTS:--Xms256m -Xmx1g}
WAIT_SECS=${KWAL_KAFKA_WAIT:-120}
HOST=127.0.0.1
SASL_PASSWORD=${KWAL_KAFKA_SASL_PASSWORD:-kwal-secret}
MARKER=.kwal-kafka # present in a state dir this script made; nothing else is ever deleted

log() { echo "kafka: $*" >&2; }
die() { echo "kafka: error: $*" >&2; exit 1; }

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

# ---------------------------------------------------------------------------------------------------
# Java and Maven

JAVA=
find_java() {
  [[ -n $JAVA ]] && return 0
  if [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then
    JAVA=$JAVA_HOME/bin/java
  elif command -v java >/dev/null 2>&1; then
    JAVA=$(command -v java)
  else
    die "Java not found: Apache Kafka $KAFKA_VERSION needs Java 17 or newer (install e.g. openjdk-17-jre-headless, or set JAVA_HOME)"
  fi
  local line ver major
  line=$("$JAVA" -version 2>&1 | head -n 1) || die "cannot run $JAVA -version"
  ver=$(sed -n 's/.*version "\([^"]*\)".*/\1/p' <<<"$line")
  [[ -n $ver ]] || die "cannot tell the Java version from: $line"
  major=${ver%%[.+-]*}
  if [[ $major == 1 ]]; then major=$(cut -d. -f2 <<<"$ver"); fi # 1.8.0_x -> 8
  [[ $major =~ ^[0-9]+$ ]] || die "cannot tell the Java version from: $line"
  if ((major < 17)); then
    die "Java $ver at $JAVA is too old: Apache Kafka $KAFKA_VERSION needs Java 17 or newer"
  fi
}

jars_ready() {
  [[ -f $CACHE/.complete ]] && [[ $(cat "$CACHE/.complete") == "$KAFKA_VERSION $LOG4J_VERSION" ]] &&
    compgen -G "$CACHE/lib/kafka_$SCALA_VERSION-$KAFKA_VERSION.jar" >/dev/null &&
    compgen -G "$CACHE/lib/kafka-tools-$KAFKA_VERSION.jar" >/dev/null &&
    compgen -G "$CACHE/lib/log4j-slf4j-impl-*.jar" >/dev/null
}

fetch_jars() {
  jars_ready && return 0
  mkdir -p "$CACHE"
  # One download at a time (e.g. two terminals starting at once).
  exec 8>"$CACHE/.lock"
  if command -v flock >/dev/null 2>&1; then flock 8; fi
  if jars_ready; then exec 8>&-; return 0; fi
  command -v mvn >/dev/null 2>&1 ||
    die "Maven (mvn) not found: it is needed once to download Apache Kafka $KAFKA_VERSION from Maven Central into $CACHE (install it, e.g. apt-get install maven)"
  log "downloading Apache Kafka $KAFKA_VERSION and its dependencies with Maven into $CACHE/lib"
  cat >"$CACHE/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by kwal's scripts/kafka.sh: the runtime of an Apache Kafka $KAFKA_VERSION broker and tools. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.kwal</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>$KAFKA_VERSION</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_$SCALA_VERSION</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-api</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
EOF
  rm -rf "$CACHE/lib.tmp" "$CACHE/.complete"
  local args=(-B -q -f "$CACHE/pom.xml" dependency:copy-dependencies
    -DoutputDirectory="$CACHE/lib.tmp" -DincludeScope=runtime)
  if [[ -n ${KWAL_KAFKA_M2:-} ]]; then args+=(-Dmaven.repo.local="$KWAL_KAFKA_M2"); fi
  if ! mvn "${args[@]}" >"$CACHE/mvn.log" 2>&1; then
    tail -n 40 "$CACHE/mvn.log" >&2
    die "Maven could not download Apache Kafka $KAFKA_VERSION (full output in $CACHE/mvn.log)"
  fi
  # Never two SLF4J bindings on the classpath.
  if compgen -G "$CACHE/lib.tmp/log4j-slf4j2-impl-*.jar" >/dev/null; then
    rm -f "$CACHE"/lib.tmp/log4j-slf4j2-impl-*.jar
  fi
  rm -rf "${CACHE:?}/lib"
  mv "$CACHE/lib.tmp" "$CACHE/lib"
  echo "$KAFKA_VERSION $LOG4J_VERSION" >"$CACHE/.complete"
  log "downloaded $(find "$CACHE/lib" -name '*.jar' | wc -l) jars ($(du -sh "$CACHE/lib" | cut -f1))"
  exec 8>&-
}

classpath() {
  local cp='' j
  for j in "$CACHE"/lib/*.jar; do cp+=${cp:+:}$j; done
  printf '%s' "$cp"
}

# Logging of command-line tools (StorageTool, TopicCommand, ProducerPerformance): warnings to stderr.
tools_log_config() {
  local f=$CACHE/tools-log4j2.properties
  if [[ ! -f $f ]]; then
    cat >"$f.tmp" <<'EOF'
status = warn
name = kwal-kafka-tools
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
EOF
    mv "$f.tmp" "$f"
  fi
  printf '%s' "$f"
}

# run_tool MAINCLASS ARGS...: a Kafka command-line tool on the cached classpath.
run_tool() {
  local main=$1; shift
  "$JAVA" -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$(tools_log_config)" -cp "$(classpath)" "$main" "$@"
}

# ---------------------------------------------------------------------------------------------------
# Cluster layout

broker_port() { echo $((BASE_PORT + 2 * ($1 - 1))); }
controller_port() { echo $((BASE_PORT + 2 * ($1 - 1) + 1)); }
node_dir() { echo "$STATE/node-$1"; }

# Number of nodes of the cluster in $STATE (0 when none).
state_brokers() {
  if [[ -f $STATE/brokers ]]; then cat "$STATE/brokers"; else echo 0; fi
}

bootstrap_servers() {
  local n=$1 i s=
  for ((i = 1; i <= n; i++)); do s+=${s:+,}$HOST:$(broker_port "$i"); done
  echo "$s"
}

controller_servers() {
  local n=$1 i s=
  for ((i = 1; i <= n; i++)); do s+=${s:+,}$HOST:$(controller_port "$i"); done
  echo "$s"
}

# pid_of ID: the PID of node ID if it is running (and really is our broker), else nothing.
pid_of() {
  local f pid
  f=$(node_dir "$1")/kafka.pid
  [[ -f $f ]] || return 0
  pid=$(cat "$f" 2>/dev/null || true)
  [[ $pid =~ ^[0-9]+$ ]] || return 0
  kill -0 "$pid" 2>/dev/null || return 0
  local cmd
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
  if [[ $cmd == *" kafka.Kafka "* ]]; then echo "$pid"; fi
}

port_open() { # port_open PORT: something accepts TCP connections on 127.0.0.1:PORT
  (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

port_taken() { # port_taken PORT: open, or bound by a listener on any address
  port_open "$1" && return 0
  if command -v ss >/dev/null 2>&1; then
    [[ -n $(ss -Htln "sport = :$1" 2>/dev/null || true) ]] && return 0
  fi
  return 1
}

# sasl_enabled: the cluster in $STATE was started with --sasl.
sasl_enabled() { [[ -f $STATE/sasl ]]; }
# tls_mode: "tls" or "mtls" when the cluster was started with --tls or --mtls, else nothing.
tls_mode() { if [[ -f $STATE/tls-mode ]]; then cat "$STATE/tls-mode"; fi; }

# make_certs: a CA of the run's own and a server and a client certificate it signed (both for
# 127.0.0.1 and localhost, both usable as server and client), PEM files in $STATE/tls; the broker's
# keystore is its key followed by its chain.
make_certs() {
  local d=$STATE/tls name
  command -v openssl >/dev/null 2>&1 || die "--tls and --mtls need openssl to make the run's certificates"
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.pem" -days 2 \
    -subj "/CN=kwal test CA $(date +%s)" 2>/dev/null || die "openssl could not make the CA"
  for name in server client; do
    openssl req -newkey rsa:2048 -nodes -keyout "$d/$name.key" -out "$d/$name.csr" -subj "/CN=kwal-$name" \
      2>/dev/null || die "openssl could not make the $name key"
    printf 'subjectAltName=IP:%s,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' "$HOST" >"$d/$name.ext"
    openssl x509 -req -in "$d/$name.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
      -extfile "$d/$name.ext" -out "$d/$name.pem" 2>/dev/null || die "openssl could not sign the $name certificate"
  done
  cat "$d/server.key" "$d/server.pem" "$d/ca.pem" >"$d/server-keystore.pem"
  chmod 600 "$d"/*.key "$d/server-keystore.pem"
}

write_node_config() {
  local id=$1 n=$2 dir rf min_isr proto=PLAINTEXT
  dir=$(node_dir "$id")
  if sasl_enabled; then proto=SASL_PLAINTEXT; fi
  if [[ -n $(tls_mode) ]]; then proto=SSL; fi
  rf=$n
  if ((n >= 3)); then min_isr=2; else min_isr=1; fi
  mkdir -p "$dir/data"
  cat >"$dir/server.properties" <<EOF
# Written by kwal's scripts/kafka.sh: node $id of a $n-node Apache Kafka $KAFKA_VERSION test cluster (KRaft).
process.roles=broker,controller
node.id=$id
listeners=$proto://$HOST:$(broker_port "$id"),CONTROLLER://$HOST:$(controller_port "$id")
advertised.listeners=$proto://$HOST:$(broker_port "$id"),CONTROLLER://$HOST:$(controller_port "$id")
inter.broker.listener.name=$proto
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,$proto:$proto
controller.quorum.bootstrap.servers=$(controller_servers "$n")
log.dirs=$dir/data

# Topics: created explicitly only, deletable, one partition, replicated on every node.
auto.create.topics.enable=false
delete.topic.enable=true
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=$min_isr
# Never elect a replica that is not in sync: a leader change must not lose acknowledged records.
unclean.leader.election.enable=false

# Internal topics.
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$min_isr
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$min_isr
group.initial.rebalance.delay.ms=0

# Record batches of up to 16 MiB (kwal sends batches of up to 8 MiB).
message.max.bytes=16777216
replica.fetch.max.bytes=16777216
replica.fetch.response.max.bytes=33554432

$(sasl_enabled && cat <<SASL
# --sasl: clients authenticate with PLAIN or SCRAM-SHA-512 (user kwal); brokers among themselves with PLAIN.
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret" user_kwal="$SASL_PASSWORD";
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
SASL
)
$([[ -n $(tls_mode) ]] && cat <<TLS
# --tls / --mtls: certificates of this run's own CA (made by openssl in $STATE/tls).
ssl.keystore.type=PEM
ssl.keystore.location=$STATE/tls/server-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$STATE/tls/ca.pem
ssl.client.auth=$([[ $(tls_mode) == mtls ]] && echo required || echo none)
TLS
)

# log.flush.*: Kafka's defaults (no fsync per message; durability comes from replication).
num.network.threads=3
num.io.threads=8
EOF
  cat >"$dir/log4j2.properties" <<EOF
status = warn
name = kwal-kafka-node-$id
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $dir/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.netclient.name = org.apache.kafka.clients.NetworkClient
logger.netclient.level = WARN
EOF
}

format_storage() {
  local n=$1 cluster_id i dir scram=()
  if sasl_enabled; then scram=(--add-scram "SCRAM-SHA-512=[name=kwal,password=$SASL_PASSWORD]"); fi
  cluster_id=$(run_tool kafka.tools.StorageTool random-uuid | tail -n 1)
  [[ -n $cluster_id ]] || die "kafka.tools.StorageTool random-uuid printed nothing"
  echo "$cluster_id" >"$STATE/cluster-id"
  if ((n == 1)); then
    log "formatting KRaft storage (cluster id $cluster_id, standalone controller)"
    run_tool kafka.tools.StorageTool format -t "$cluster_id" -c "$(node_dir 1)/server.properties" \
      --standalone "${scram[@]}" >"$(node_dir 1)/format.log" 2>&1 ||
      { cat "$(node_dir 1)/format.log" >&2; die "formatting the storage of node 1 failed"; }
    return 0
  fi
  # Several controllers: a dynamic quorum (KIP-853) whose initial voters are every node, each named by
  # ID, controller endpoint and the directory ID of its metadata log dir.
  local voters='' dir_id
  for ((i = 1; i <= n; i++)); do
    dir_id=$(run_tool kafka.tools.StorageTool random-uuid | tail -n 1)
    voters+=${voters:+,}$i@$HOST:$(controller_port "$i"):$dir_id
  done
  log "formatting KRaft storage (cluster id $cluster_id, initial controllers $voters)"
  local pids=()
  for ((i = 1; i <= n; i++)); do
    dir=$(node_dir "$i")
    run_tool kafka.tools.StorageTool format -t "$cluster_id" -c "$dir/server.properties" \
      --initial-controllers "$voters" "${scram[@]}" >"$dir/format.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 1; i <= n; i++)); do
    wait "${pids[i - 1]}" ||
      { cat "$(node_dir "$i")/format.log" >&2; die "formatting the storage of node $i failed"; }
  done
}

start_node() {
  local id=$1 dir i
  dir=$(node_dir "$id")
  : >"$dir/server.log"
  rm -f "$dir/kafka.pid"
  # In its own session (a Ctrl-C of the caller does not reach it); the child writes its own PID, then
  # becomes the JVM.
  # shellcheck disable=SC2086 # HEAP_OPTS and KWAL_KAFKA_JAVA_OPTS are word lists
  # shellcheck disable=SC2016 # $$, $1 and $@ are the child's
  setsid bash -c 'echo $$ >"$1.tmp" && mv "$1.tmp" "$1" && shift && exec "$@"' kafka-node \
    "$dir/kafka.pid" "$JAVA" $HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:+ExitOnOutOfMemoryError \
    -Djava.awt.headless=true -Dlog4j2.configurationFile="$dir/log4j2.properties" ${KWAL_KAFKA_JAVA_OPTS:-} \
    -cp "$(classpath)" kafka.Kafka "$dir/server.properties" \
    </dev/null >"$dir/stdout.log" 2>&1 &
  for ((i = 0; i < 100; i++)); do
    [[ -f $dir/kafka.pid ]] && return 0
    sleep 0.05
  done
  die "node $id did not start (no PID file $dir/kafka.pid)"
}

print_tail() { # print_tail ID: the last 40 lines of node ID's logs
  local dir
  dir=$(node_dir "$1")
  echo "----- last 40 lines of $dir/server.log -----" >&2
  tail -n 40 "$dir/server.log" >&2 2>/dev/null || true
  if [[ -s $dir/stdout.log ]]; then
    echo "----- last 40 lines of $dir/stdout.log -----" >&2
    tail -n 40 "$dir/stdout.log" >&2 || true
  fi
  echo "-----" >&2
}

kill_nodes() { # kill_nodes N: stop every node, SIGTERM then SIGKILL after 30 s
  local n=$1 i pid pids=() deadline
  for ((i = 1; i <= n; i++)); do
    pid=$(pid_of "$i")
    if [[ -n $pid ]]; then
      kill -CONT "$pid" 2>/dev/null || true # a paused node cannot act on SIGTERM
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  ((${#pids[@]} > 0)) || return 0
  deadline=$((SECONDS + 30))
  while ((SECONDS < deadline)); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || return 0
    sleep 0.2
  done
  for pid in "${pids[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      log "PID $pid did not stop within 30 s of SIGTERM: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  sleep 0.5
}

# ---------------------------------------------------------------------------------------------------
# Subcommands

cmd_start() {
  local n=1 sasl=0 tls=
  while (($#)); do
    case $1 in
      --brokers) [[ $# -ge 2 ]] || die "--brokers needs a number"; n=$2; shift 2 ;;
      --brokers=*) n=${1#*=}; shift ;;
      --sasl) sasl=1; shift ;;
      --tls) tls=tls; shift ;;
      --mtls) tls=mtls; shift ;;
      -h | --help) usage; exit 0 ;;
      *) die "start: unknown argument: $1" ;;
    esac
  done
  [[ $sasl == 0 || -z $tls ]] || die "--sasl and --tls/--mtls do not combine (yet): pick one"
  [[ $n == 1 || $n == 3 ]] || die "--brokers must be 1 or 3 (a KRaft quorum wants an odd number of controllers; 3 is enough for tests)"
  [[ $BASE_PORT =~ ^[0-9]+$ ]] || die "KWAL_KAFKA_PORT must be a port number"
  find_java

  # Already running?
  local have i running=0
  have=$(state_brokers)
  for ((i = 1; i <= have; i++)); do [[ -n $(pid_of "$i") ]] && running=$((running + 1)); done
  if ((running > 0)); then
    if ((running == have && have == n)); then
      log "already running"
      echo "kafka: Apache Kafka $KAFKA_VERSION ready at $(bootstrap_servers "$n")"
      return 0
    fi
    die "a $have-node cluster is already (partly) running from $STATE: run '$0 stop' first"
  fi

  # Ports free?
  local p
  for ((i = 1; i <= n; i++)); do
    for p in "$(broker_port "$i")" "$(controller_port "$i")"; do
      if port_taken "$p"; then
        die "port $p on $HOST is already in use (needed by node $i); stop whatever listens there, or set KWAL_KAFKA_PORT to another first port"
      fi
    done
  done

  fetch_jars

  # State dir: reuse a formatted one of the same size (after 'stop --keep'), else make it anew.
  if [[ -e $STATE && ! -f $STATE/$MARKER ]]; then
    if [[ -n $(ls -A "$STATE" 2>/dev/null) ]]; then
      die "$STATE exists and was not made by this script; set KWAL_KAFKA_HOME to another directory"
    fi
  fi
  local reuse=0
  if [[ -f $STATE/$MARKER && $have == "$n" && -f $(node_dir 1)/data/meta.properties ]]; then
    reuse=1
    for ((i = 1; i <= n; i++)); do [[ -f $(node_dir "$i")/data/meta.properties ]] || reuse=0; done
    if sasl_enabled; then ((sasl)) || reuse=0; else ((!sasl)) || reuse=0; fi
    [[ $(tls_mode) == "$tls" ]] || reuse=0
  fi
  if ((reuse)); then
    log "reusing the formatted $n-node cluster in $STATE"
    for ((i = 1; i <= n; i++)); do write_node_config "$i" "$n"; done
  else
    [[ -f $STATE/$MARKER ]] && rm -rf "$STATE"
    mkdir -p "$STATE"
    touch "$STATE/$MARKER"
    echo "$n" >"$STATE/brokers"
    if ((sasl)); then touch "$STATE/sasl"; fi
    if [[ -n $tls ]]; then
      echo "$tls" >"$STATE/tls-mode"
      make_certs
    fi
    for ((i = 1; i <= n; i++)); do write_node_config "$i" "$n"; done
    format_storage "$n"
  fi

  for ((i = 1; i <= n; i++)); do
    log "starting node $i: broker $HOST:$(broker_port "$i"), controller $HOST:$(controller_port "$i"), log $(node_dir "$i")/server.log"
    start_node "$i"
  done
  local all=()
  for ((i = 1; i <= n; i++)); do all+=("$i"); done
  wait_ready "$n" "${all[@]}"
  if sasl_enabled; then log "SASL_PLAINTEXT: PLAIN and SCRAM-SHA-512, user kwal"; fi
  if [[ -n $(tls_mode) ]]; then log "$(tls_mode | tr a-z A-Z): CA $STATE/tls/ca.pem, client certificate $STATE/tls/client.pem, key $STATE/tls/client.key"; fi
  echo "kafka: Apache Kafka $KAFKA_VERSION ready at $(bootstrap_servers "$n")"
}

# wait_ready N ID...: wait until every named node of the N-node cluster logged "Kafka Server started" and
# its broker port accepts connections; on failure print their logs, stop the whole cluster and die.
wait_ready() {
  local n=$1 i pid ready deadline=$((SECONDS + WAIT_SECS))
  shift
  while :; do
    ready=1
    for i in "$@"; do
      pid=$(pid_of "$i")
      if [[ -z $pid ]]; then
        sleep 0.5 # let the JVM finish writing its last words
        log "node $i (PID $(cat "$(node_dir "$i")/kafka.pid")) died while starting"
        print_tail "$i"
        kill_nodes "$n"
        die "Apache Kafka did not start (state and logs kept in $STATE; '$0 stop' removes them)"
      fi
      if ! grep -q 'Kafka Server started' "$(node_dir "$i")/server.log" 2>/dev/null ||
        ! port_open "$(broker_port "$i")"; then
        ready=0
      fi
    done
    ((ready)) && return 0
    if ((SECONDS >= deadline)); then
      for i in "$@"; do print_tail "$i"; done
      kill_nodes "$n"
      die "Apache Kafka was not ready within $WAIT_SECS s (state and logs kept in $STATE; '$0 stop' removes them)"
    fi
    sleep 0.25
  done
}

cmd_stop() {
  local keep=0
  while (($#)); do
    case $1 in
      --keep) keep=1; shift ;;
      -h | --help) usage; exit 0 ;;
      *) die "stop: unknown argument: $1" ;;
    esac
  done
  local n i any=0
  n=$(state_brokers)
  for ((i = 1; i <= n; i++)); do [[ -n $(pid_of "$i") ]] && any=1; done
  if ((any)); then
    log "stopping $n node(s)"
    kill_nodes "$n"
    log "stopped"
  else
    log "not running"
  fi
  if ((!keep)) && [[ -f $STATE/$MARKER ]]; then
    rm -rf "$STATE"
    log "removed $STATE"
  fi
}

cmd_status() {
  local n i pid up=0
  n=$(state_brokers)
  if ((n == 0)); then
    echo "kafka: not running (no cluster in $STATE)"
    return 1
  fi
  for ((i = 1; i <= n; i++)); do
    pid=$(pid_of "$i")
    if [[ -n $pid ]]; then
      up=$((up + 1))
      echo "kafka: node $i running, PID $pid, broker $HOST:$(broker_port "$i"), controller $HOST:$(controller_port "$i")"
    else
      echo "kafka: node $i not running (broker $HOST:$(broker_port "$i"))"
    fi
  done
  if ((up == n)); then
    echo "kafka: Apache Kafka $KAFKA_VERSION running at $(bootstrap_servers "$n") (state in $STATE)"
    return 0
  fi
  echo "kafka: $up of $n node(s) running (state in $STATE)"
  return 1
}

cmd_logs() {
  local follow=0 lines=100 node='' n i files=()
  while (($#)); do
    case $1 in
      -f | --follow) follow=1; shift ;;
      -n) lines=$2; shift 2 ;;
      --node) node=$2; shift 2 ;;
      *) die "logs: unknown argument: $1" ;;
    esac
  done
  n=$(state_brokers)
  ((n > 0)) || die "no cluster in $STATE"
  if [[ -n $node ]]; then
    files=("$(node_dir "$node")/server.log")
  else
    for ((i = 1; i <= n; i++)); do files+=("$(node_dir "$i")/server.log"); done
  fi
  if ((follow)); then exec tail -n "$lines" -F "${files[@]}"; fi
  tail -n "$lines" "${files[@]}"
}

# The cluster's bootstrap servers, or an error when it is not running.
running_bootstrap() {
  local n i
  n=$(state_brokers)
  ((n > 0)) || die "Kafka is not running: run '$0 start' first"
  for ((i = 1; i <= n; i++)); do
    [[ -n $(pid_of "$i") ]] || die "node $i of the cluster in $STATE is not running"
  done
  bootstrap_servers "$n"
}

cmd_topics() {
  local bs
  bs=$(running_bootstrap)
  find_java
  fetch_jars
  run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bs" "$@"
}

cmd_perf() {
  local bs n topic='' a have_records=0 have_size=0 have_tput=0 have_props=0 have_bs=0 i
  bs=$(running_bootstrap)
  n=$(state_brokers)
  find_java
  fetch_jars
  local args=("$@")
  for ((i = 0; i < ${#args[@]}; i++)); do
    a=${args[i]}
    case $a in
      --topic) topic=${args[i + 1]:-} ;;
      --topic=*) topic=${a#*=} ;;
      --num-records | --num-records=*) have_records=1 ;;
      --record-size | --record-size=* | --payload-file | --payload-file=* | --payload-monotonic) have_size=1 ;;
      --throughput | --throughput=*) have_tput=1 ;;
      --producer-props | --producer-props=* | --command-property | --command-property=*) have_props=1 ;;
      --bootstrap-server | --bootstrap-server=*) have_bs=1 ;;
    esac
  done
  local extra=()
  if [[ -z $topic ]]; then
    topic=kwal-perf-$(date +%Y%m%d-%H%M%S)-$$
    extra+=(--topic "$topic")
  fi
  log "creating topic $topic (1 partition, replication factor $n)"
  run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bs" --create --if-not-exists \
    --topic "$topic" --partitions 1 --replication-factor "$n" >&2
  ((have_records)) || extra+=(--num-records 200000)
  ((have_size)) || extra+=(--record-size 1024)
  ((have_tput)) || extra+=(--throughput -1)
  ((have_bs)) || extra+=(--bootstrap-server "$bs")
  ((have_props)) || extra+=(--command-property acks=all)
  log "org.apache.kafka.tools.ProducerPerformance ${extra[*]} ${args[*]}"
  "$JAVA" -Xms512m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$(tools_log_config)" -cp "$(classpath)" \
    org.apache.kafka.tools.ProducerPerformance "${extra[@]}" "${args[@]}"
}

# node ACTION ID: one node of a running cluster, for fault tests. The others keep running.
cmd_node() {
  [[ $# -eq 2 ]] || die "usage: $0 node kill|stop|start|pause|resume|pid ID"
  local action=$1 id=$2 n pid
  n=$(state_brokers)
  ((n > 0)) || die "no cluster in $STATE"
  [[ $id =~ ^[0-9]+$ ]] && ((id >= 1 && id <= n)) || die "node ID must be 1..$n, not $id"
  pid=$(pid_of "$id")
  case $action in
    pid)
      [[ -n $pid ]] || die "node $id is not running"
      echo "$pid" ;;
    kill)
      [[ -n $pid ]] || die "node $id is not running"
      kill -KILL "$pid"
      while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
      log "node $id (PID $pid) killed with SIGKILL" ;;
    stop)
      [[ -n $pid ]] || die "node $id is not running"
      kill -CONT "$pid" 2>/dev/null || true
      kill -TERM "$pid"
      local deadline=$((SECONDS + 30))
      while kill -0 "$pid" 2>/dev/null; do
        if ((SECONDS >= deadline)); then
          log "node $id (PID $pid) did not stop within 30 s of SIGTERM: SIGKILL"
          kill -KILL "$pid" 2>/dev/null || true
        fi
        sleep 0.1
      done
      log "node $id (PID $pid) stopped" ;;
    start)
      [[ -z $pid ]] || die "node $id is already running (PID $pid)"
      port_taken "$(broker_port "$id")" && die "port $(broker_port "$id") is in use: cannot start node $id"
      find_java
      fetch_jars
      start_node "$id"
      wait_ready "$n" "$id"
      log "node $id started (PID $(pid_of "$id")), broker $HOST:$(broker_port "$id")" ;;
    pause)
      [[ -n $pid ]] || die "node $id is not running"
      kill -STOP "$pid"
      log "node $id (PID $pid) paused with SIGSTOP" ;;
    resume)
      [[ -n $pid ]] || die "node $id is not running"
      kill -CONT "$pid"
      log "node $id (PID $pid) resumed with SIGCONT" ;;
    *) die "node: unknown action $action (kill, stop, start, pause, resume, pid)" ;;
  esac
}

# leader TOPIC [PARTITION]: the node ID leading the partition, from TopicCommand --describe.
cmd_leader() {
  [[ $# -ge 1 && $# -le 2 ]] || die "usage: $0 leader TOPIC [PARTITION]"
  local topic=$1 part=${2:-0} bs n i leader
  n=$(state_brokers)
  ((n > 0)) || die "no cluster in $STATE"
  for ((i = 1; i <= n; i++)); do
    [[ -n $(pid_of "$i") ]] && bs+=${bs:+,}$HOST:$(broker_port "$i")
  done
  [[ -n $bs ]] || die "no node of the cluster in $STATE is running"
  find_java
  fetch_jars
  leader=$(run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bs" --describe --topic "$topic" |
    awk -v p="$part" '$0 ~ "Partition: " p "\t" || $0 ~ "Partition: " p " " {for (i = 1; i <= NF; i++) if ($i == "Leader:") print $(i + 1)}')
  [[ -n $leader ]] || die "no partition $part in topic $topic"
  echo "$leader"
}

cmd_classpath() {
  fetch_jars
  classpath
  echo
}

main() {
  local cmd=${1:-help}
  (($#)) && shift
  case $cmd in
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    status) cmd_status "$@" ;;
    logs) cmd_logs "$@" ;;
    perf) cmd_perf "$@" ;;
    topics) cmd_topics "$@" ;;
    node) cmd_node "$@" ;;
    leader) cmd_leader "$@" ;;
    fetch) find_java; fetch_jars; log "jars in $CACHE/lib" ;;
    classpath) cmd_classpath "$@" ;;
    help | -h | --help) usage ;;
    *) usage >&2; die "unknown command: $cmd" ;;
  esac
}

main "$@"
