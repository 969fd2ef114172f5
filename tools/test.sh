#!/usr/bin/env bash
# Runs every check and test of the workspace from a fresh machine: first installs what the tests
# need when it is missing (cargo-nextest, ZooKeeper, kcat, the Python clients, Kafka's jars), then runs
# rustfmt, clippy and the whole test suite. A second run finds everything present and installs
# nothing. `--deps-only` stops after the installs.
set -euo pipefail
cd "$(dirname "$0")/.."

deps_only=false
[ "${1:-}" = "--deps-only" ] && deps_only=true

# Root installs directly; anyone else needs sudo for apt-get.
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
apt_updated=false
apt_install() {
  if ! $apt_updated; then
    $sudo apt-get update
    apt_updated=true
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@"
}

if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install cargo-nextest --locked
fi

# Debian packages: the ZooKeeper migration tests run a real ZooKeeper server; kcat is the
# Kafka-protocol client the broker's Kafka-protocol tests use; chromium (headless) loads the web
# console's pages in its test.
need=()
[ -x /usr/share/zookeeper/bin/zkServer.sh ] || need+=(zookeeper)
command -v kcat >/dev/null 2>&1 || need+=(kcat)
# openssl writes the encrypted PEM and PKCS12 keystores the keystore tests read.
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v python3 >/dev/null 2>&1 || need+=(python3 python3-pip)
command -v java >/dev/null 2>&1 || need+=(default-jdk-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
if [ ${#need[@]} -gt 0 ]; then
  apt_install "${need[@]}"
fi

# Python clients the tests drive: grpcio-reflection (server reflection, v1alpha), kafka-python,
# confluent-kafka (librdkafka's Python client, with its own librdkafka).
if ! python3 -c 'import grpc, grpc_reflection.v1alpha.proto_reflection_descriptor_database, kafka, confluent_kafka' >/dev/null 2>&1; then
  if ! python3 -m pip --version >/dev/null 2>&1; then
    apt_install python3-pip
  fi
  # A distribution's own Python refuses pip installs (PEP 668) unless told otherwise; these
  # packages only add modules, so that is safe on a test machine.
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet grpcio grpcio-reflection kafka-python confluent-kafka
fi

# Kafka's own Java tools (kafka-topics, the console clients, kafka-reassign-partitions, ...), from
# Kafka's Maven artifacts; cached, so a second run calls no mvn.
tools/kafka-jars.sh >/dev/null
# Kafka 3.9, the last line with ZooKeeper mode: the migration test runs its brokers.
KAFKA_VERSION=3.9.1 tools/kafka-jars.sh >/dev/null

$deps_only && exit 0

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The tests and the binaries they run (ferry, ferry-bench, ferry-plan-bench) in one build, so that
# no test waits on a build of its own.
cargo build --workspace --bins --tests
cargo nextest run --workspace
