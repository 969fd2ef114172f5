#!/usr/bin/env bash
# Fetches the jars of Apache Kafka's command-line tools (kafka-tools, kafka_2.13 and their runtime
# dependencies, plus the SLF4J binding for Kafka's logging backend) from Maven into a cache dir,
# and prints that dir as its last line on stdout. A run that finds the cache complete calls no mvn.
#   KAFKA_VERSION     Kafka version to fetch (default 4.4.0; 3.9.x works too)
#   FERRY_KAFKA_JARS  cache dir (default ~/.cache/ferry/kafka-$KAFKA_VERSION)
set -euo pipefail

version="${KAFKA_VERSION:-4.4.0}"
dir="${FERRY_KAFKA_JARS:-$HOME/.cache/ferry/kafka-$version}"

if [ ! -f "$dir/.complete" ]; then
  mkdir -p "$(dirname "$dir")"
  work="$(mktemp -d "$(dirname "$dir")/.kafka-jars.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  dep() { echo "<dependency><groupId>org.apache.kafka</groupId><artifactId>$1</artifactId><version>$version</version></dependency>"; }
  cat >"$work/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>ferry.local</groupId><artifactId>kafka-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>$(dep kafka-tools)$(dep kafka_2.13)</dependencies>
</project>
EOF
  mvn -q -B -f "$work/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$work/jars" >&2
  # Kafka's POMs leave the SLF4J binding out (3.9 brings slf4j-reload4j; 4.x only log4j-core):
  # add the log4j2 binding that matches its log4j-core and slf4j-api versions.
  shopt -s nullglob
  bindings=("$work"/jars/{slf4j-reload4j,log4j-slf4j-impl,log4j-slf4j2-impl}-*.jar)
  if [ ${#bindings[@]} -eq 0 ]; then
    core=("$work"/jars/log4j-core-*.jar)
    [ ${#core[@]} -eq 1 ] || { echo "kafka-jars: no log4j-core among Kafka $version's jars" >&2; exit 1; }
    core="${core[0]##*/log4j-core-}"
    slf4j1=("$work"/jars/slf4j-api-1.*.jar)
    binding=log4j-slf4j2-impl
    [ ${#slf4j1[@]} -eq 0 ] || binding=log4j-slf4j-impl
    mvn -q -B -f "$work/pom.xml" dependency:copy -Dartifact="org.apache.logging.log4j:$binding:${core%.jar}" \
      -DoutputDirectory="$work/jars" >&2
  fi
  # The main classes of the Kafka jars, for kafka-tool.sh to pick a tool's class by version.
  for j in "$work"/jars/kafka-tools-*.jar "$work"/jars/kafka_2.13-*.jar; do
    if command -v unzip >/dev/null; then unzip -Z1 "$j"; else jar tf "$j"; fi
  done | grep '\.class$' >"$work/jars/.classes"
  rm -rf "$dir"
  mv "$work/jars" "$dir"
  touch "$dir/.complete"
fi
echo "$dir"
