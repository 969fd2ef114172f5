# Sourced by the bench scripts: starts a 3-node Ferry metastore as separate `ferry node`
# processes on loopback. Needs $bin (the ferry binaries), $work (a scratch dir) and a `pids`
# array; sets $endpoints and $server_pids. `stop_all` stops every process in `pids`.
# $FERRY_NODE_ARGS adds flags to every node (for example `--roles quorum`); $FERRY_LOG sets
# their RUST_LOG (default error); $FERRY_KAFKA_BASE gives node i a Kafka listener on port
# FERRY_KAFKA_BASE + i - 1; $FERRY_TWO_LOG_DIRS=1 gives node i the log dirs ferry<i>/d0 and
# ferry<i>/d1 (to compare JBOD moves). SECURE=1 makes the Kafka listeners SASL_SSL with
# SCRAM-SHA-512 only, with the PEM keystore SECURE_KEYSTORE (chain and key, as `ferry certs` writes
# server.pem), and gives SECURE_USER (default admin) the SCRAM-SHA-512 password SECURE_PASSWORD
# once the cluster is ready (`ferry users set-scram` with node 1's cluster credential). SECURE=1
# also puts the gRPC port (clients, Raft, replication) on TLS with the same keystore, mutual
# between the nodes, trusting SECURE_TRUSTSTORE; the scripts' `ferry` commands then take
# $ferry_tls (set here: `--command-config` with that truststore).
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}

start_ferry_node() { # id base port; sets pids[id - 1]
  local id=$1 base=$2
  local peers="1=127.0.0.1:$base,2=127.0.0.1:$((base + 1)),3=127.0.0.1:$((base + 2))"
  local extra=()
  [ -z "${FERRY_KAFKA_BASE:-}" ] || extra=(--kafka-listen "127.0.0.1:$((FERRY_KAFKA_BASE + id - 1))")
  [ -z "${FERRY_TWO_LOG_DIRS:-}" ] || extra+=(--log-dirs "$work/ferry$id/d0,$work/ferry$id/d1")
  [ -z "${SECURE:-}" ] || extra+=(--kafka-security-protocol SASL_SSL --sasl-enabled-mechanisms SCRAM-SHA-512
    --ssl-keystore-location "$SECURE_KEYSTORE" --grpc-ssl-keystore-location "$SECURE_KEYSTORE"
    --grpc-ssl-truststore-location "$SECURE_TRUSTSTORE")
  RUST_LOG=${FERRY_LOG:-error} "$bin/ferry" node --id "$id" --data-dir "$work/ferry$id" \
    --listen "127.0.0.1:$((base + id - 1))" --peers "$peers" "${extra[@]}" ${FERRY_NODE_ARGS:-} \
    >>"$work/ferry$id.log" 2>&1 &
  pids[id - 1]=$!
}

start_ferry_cluster() { # base port
  local base=$1
  ferry_tls=()
  if [ -n "${SECURE:-}" ]; then
    printf 'security.protocol=SSL\nssl.truststore.location=%s\n' "$SECURE_TRUSTSTORE" >"$work/ferry-tls.properties"
    ferry_tls=(--command-config "$work/ferry-tls.properties")
  fi
  for id in 1 2 3; do start_ferry_node "$id" "$base"; done
  endpoints="127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
  server_pids=$(IFS=,; echo "${pids[*]}")
  local ready=""
  for _ in $(seq 1 300); do
    # Ready once a write commits and node 1 has written the cluster credential it applied
    # (the scripts read it from there).
    "$bin/ferry" kv put /bench-ready 1 --bootstrap-server "$endpoints" "${ferry_tls[@]}" >/dev/null 2>&1 &&
      [ -s "$work/ferry1/cluster-credential" ] && ready=1 && break
    sleep 0.2
  done
  if [ -z "$ready" ]; then
    echo "the Ferry cluster did not become ready" >&2
    return 1
  fi
  # The Security service takes users from holders of the cluster credential only.
  [ -z "${SECURE:-}" ] || "$bin/ferry" users set-scram "${SECURE_USER:-admin}" --password "$SECURE_PASSWORD" \
    --mechanism SCRAM-SHA-512 --bootstrap-server "$endpoints" "${ferry_tls[@]}" \
    --cluster-credential-file "$work/ferry1/cluster-credential" >/dev/null
}
