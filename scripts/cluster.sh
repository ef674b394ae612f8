#!/usr/bin/env bash
# A whole tweetsearch cluster on loopback, for demos and trying failover by hand:
# etcd, Redis, 2 storage partitions x 2 replicas, 2 index partitions x 2 replicas, two builders
# and two front doors, each its own tweetsearchd process (docs/cluster.md).
#
#   scripts/cluster.sh start [--sample N]   install, build, start, wait until ready, load N
#                                           generated tweets (default 100000; 0: none)
#   scripts/cluster.sh status               which processes run, and tweetctl status
#   scripts/cluster.sh stop                 stop every process (data stays in build/cluster)
#   scripts/cluster.sh kill NODE            SIGKILL one node (e.g. s0a, i1b, a0, etcd)
#   scripts/cluster.sh restart NODE         start a node again (also etcd, haproxy, redis)
#   scripts/cluster.sh wipe NODE            SIGKILL a node and delete its data (a lost server)
#
# Ports: etcd 2479, Redis 6479, storage 7100-7103, index 7200-7203, builders 7300-7301, front
# doors HTTP 8081 and 8082, gRPC 9091 and 9092, and HAProxy on 8090 in front of both front doors
# (the cluster's one address: data/haproxy-cluster.cfg). CLUSTER_DIR overrides build/cluster;
# CLUSTER_MAX_LOG_CHANGES sets how many changes each storage log keeps (default 50000000);
# CLUSTER_FRONT_DOOR_FLAGS adds tweetsearchd flags to both front doors (e.g. "--limits FILE").
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${CLUSTER_DIR:-build/cluster}
BIN=${TWEETSEARCH_BIN:-build/run/tools}  # set it to use binaries built elsewhere (no build)
ETCD_PORT=2479
REDIS_PORT=6479
LB_PORT=8090
NODES="s0a s0b s1a s1b i0a i0b i1a i1b b0 b1 a0 a1"

role_of() {
  case $1 in s*) echo storage ;; i*) echo index ;; b*) echo builder ;; a*) echo aggregator ;; esac
}

write_topology() {
  mkdir -p "$DIR"
  local d; d=$(cd "$DIR" && pwd)
  cat > "$DIR/topology.yaml" <<YAML
etcd: [127.0.0.1:$ETCD_PORT]
redis: 127.0.0.1:$REDIS_PORT
lease_ttl_s: 5
allow_single_replica: true   # a primary whose secondary is down keeps taking writes
max_log_changes: ${CLUSTER_MAX_LOG_CHANGES:-50000000}
storage_partitions:
  - replicas: [{node: s0a, grpc: 127.0.0.1:7100, data: $d/s0a}, {node: s0b, grpc: 127.0.0.1:7101, data: $d/s0b}]
  - replicas: [{node: s1a, grpc: 127.0.0.1:7102, data: $d/s1a}, {node: s1b, grpc: 127.0.0.1:7103, data: $d/s1b}]
index_partitions:
  - replicas: [{node: i0a, grpc: 127.0.0.1:7200, data: $d/i0a}, {node: i0b, grpc: 127.0.0.1:7201, data: $d/i0b}]
  - replicas: [{node: i1a, grpc: 127.0.0.1:7202, data: $d/i1a}, {node: i1b, grpc: 127.0.0.1:7203, data: $d/i1b}]
builders:
  - {node: b0, grpc: 127.0.0.1:7300, data: $d/b0}
  - {node: b1, grpc: 127.0.0.1:7301, data: $d/b1}
aggregators:
  - {node: a0, http: 127.0.0.1:8081, grpc: 127.0.0.1:9091, data: $d/a0}
  - {node: a1, http: 127.0.0.1:8082, grpc: 127.0.0.1:9092, data: $d/a1}
YAML
}

running() { [[ -f "$DIR/$1.pid" ]] && kill -0 "$(cat "$DIR/$1.pid")" 2>/dev/null; }

start_node() {
  local node=$1
  running "$node" && return 0
  # A demo on loopback: the demo key may ingest (tweetsearchd's default is search only).
  local extra=()
  # CLUSTER_FRONT_DOOR_FLAGS: more flags for both front doors (e.g. "--limits FILE").
  # shellcheck disable=SC2206
  [[ $(role_of "$node") == aggregator ]] &&
    extra=(--demo-key-scopes search,ingest ${CLUSTER_FRONT_DOOR_FLAGS:-})
  "$BIN/tweetsearchd" --topology "$DIR/topology.yaml" --role "$(role_of "$node")" --node "$node" \
    "${extra[@]}" >> "$DIR/$node.log" 2>&1 &
  echo $! > "$DIR/$node.pid"
}

# etcd, HAProxy (the cluster's one address) and Redis (the front doors' shared quotas).
start_service() {
  running "$1" && return 0
  case $1 in
    etcd)
      etcd --name ts --data-dir "$DIR/etcd" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls http://127.0.0.1:2480 --initial-advertise-peer-urls http://127.0.0.1:2480 \
        --initial-cluster ts=http://127.0.0.1:2480 >> "$DIR/etcd.log" 2>&1 & ;;
    haproxy)
      sed -e "s/@BIND@/127.0.0.1:$LB_PORT/; s/@A0@/127.0.0.1:8081/; s/@A1@/127.0.0.1:8082/" \
        data/haproxy-cluster.cfg > "$DIR/haproxy.cfg"
      haproxy -db -f "$DIR/haproxy.cfg" >> "$DIR/haproxy.log" 2>&1 & ;;
    redis)
      redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$DIR" \
        >> "$DIR/redis.log" 2>&1 & ;;
  esac
  echo $! > "$DIR/$1.pid"
}

start() {
  local sample=100000
  if [[ ${1:-} == --sample ]]; then sample=$2; fi
  if [[ -z ${TWEETSEARCH_BIN:-} ]]; then
    scripts/install-deps.sh
    cmake -S . -B build/run -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF \
      -DBUILD_BENCHMARKS=OFF > /dev/null
    cmake --build build/run -j "$(nproc)" --target tweetsearchd tweetctl tweetgen
  fi
  write_topology
  for service in etcd haproxy redis; do start_service "$service"; done
  for _ in $(seq 50); do
    curl -sf -X POST "http://127.0.0.1:$ETCD_PORT/v3/kv/range" -d '{"key":"AA=="}' > /dev/null && break
    sleep 0.2
  done
  for node in $NODES; do start_node "$node"; done
  echo -n "waiting for the cluster"
  local key=demo-key-0123456789 ready=""
  for _ in $(seq 150); do
    if curl -sf "http://127.0.0.1:8081/v1/search?api_dev_key=$key&search_terms=x" > /dev/null &&
       curl -sf "http://127.0.0.1:8082/v1/search?api_dev_key=$key&search_terms=x" > /dev/null; then
      ready=1; break
    fi
    echo -n "."; sleep 0.2
  done
  echo
  [[ -n $ready ]] || { echo "the cluster did not become ready; see $DIR/*.log" >&2; exit 1; }
  # Searches answer before every storage partition has a primary: wait for those too.
  for _ in $(seq 150); do
    "$BIN/tweetctl" status --topology "$DIR/topology.yaml" > /dev/null 2>&1 && break
    sleep 0.2
  done
  if [[ $sample -gt 0 && ! -f $DIR/sample-loaded ]]; then
    "$BIN/tweetgen" --count "$sample" | "$BIN/tweetctl" --server http://127.0.0.1:8081 ingest -
    touch "$DIR/sample-loaded"
  fi
  cat <<TXT
cluster running (data and logs in $DIR):
  search:  curl 'http://127.0.0.1:$LB_PORT/v1/search?api_dev_key=$key&search_terms=love'
           (HAProxy in front of both front doors, :8081 and :8082; gRPC on 127.0.0.1:9091
           and :9092)
  web:     http://127.0.0.1:$LB_PORT/
  state:   scripts/cluster.sh status
  stop:    scripts/cluster.sh stop
TXT
}

status() {
  for node in etcd redis haproxy $NODES; do
    if running "$node"; then echo "$node: running (pid $(cat "$DIR/$node.pid"))"; else echo "$node: stopped"; fi
  done
  if running etcd; then
    echo
    "$BIN/tweetctl" status --topology "$DIR/topology.yaml"
  fi
}

stop_node() {
  local node=$1 signal=${2:-TERM}
  running "$node" || return 0
  local pid; pid=$(cat "$DIR/$node.pid")
  kill -"$signal" "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$DIR/$node.pid"
}

stop() {
  for node in haproxy a0 a1 b0 b1 i0a i0b i1a i1b s0a s0b s1a s1b redis etcd; do stop_node "$node"; done
  echo "stopped"
}

case ${1:-} in
  start) shift; start "$@" ;;
  status) status ;;
  stop) stop ;;
  kill) stop_node "$2" KILL ;;
  restart)
    case ${2:-} in etcd | haproxy | redis) start_service "$2" ;; *) start_node "$2" ;; esac ;;
  wipe)
    [[ " $NODES " == *" ${2:-} "* ]] || { echo "wipe: name a node ($NODES)" >&2; exit 2; }
    stop_node "$2" KILL; rm -rf "${DIR:?}/${2:?}" ;;
  *) sed -n '2,20p' "$0"; exit 2 ;;
esac
