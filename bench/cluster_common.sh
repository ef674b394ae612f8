# Sourced by the cluster benchmarks (bench/cluster_bench.sh, bench/cluster_cpu.sh), with BUILD
# and WORK set: stops the local cluster and the one process and removes WORK on exit, and
# starts one tweetsearchd process beside the cluster (start_single: sets PID and PORT).
cleanup() {
  scripts/cluster.sh stop > /dev/null 2>&1 || true
  kill -TERM "${PID:-0}" 2> /dev/null || true
  wait 2> /dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

start_single() {
  "$BUILD/tools/tweetsearchd" --data-dir "$WORK/single" --http-port 0 --grpc-port -1 --sample 0 \
    --demo-key-scopes search,ingest --port-file "$WORK/ports" --log-level warn &
  PID=$!
  for _ in $(seq 1 600); do [ -s "$WORK/ports" ] && break; sleep 0.1; done
  PORT=$(sed -E 's/.*"http_port": ([0-9]+).*/\1/' "$WORK/ports")
}
