#!/bin/sh
# Cassandra in the foreground as PID 1 (SIGTERM stops it cleanly), flags as the native recipe's start().
set -eu
for d in data commitlog saved_caches hints cdc_raw logs; do mkdir -p "/var/lib/scylla/$d"; done
heap="${CASSANDRA_HEAP:-1G}"
# shellcheck disable=SC2046 # one JVM flag per line of jvm.options
exec java "-Xms$heap" "-Xmx$heap" -XX:+UseG1GC -Xss256k $(cat /opt/cassandra/conf/jvm.options) \
  -Dcassandra.config=file:///opt/cassandra/conf/cassandra.yaml \
  -Dlogback.configurationFile=file:///opt/cassandra/conf/logback.xml \
  -Dcassandra.logdir=/var/lib/scylla/logs -Dcassandra.storagedir=/var/lib/scylla -Dcassandra-foreground=yes \
  -Dcassandra.skip_wait_for_gossip_to_settle=0 -Dcassandra.ring_delay_ms=1000 -Dcassandra.jmx.local.port=0 \
  -cp '/opt/cassandra/lib/*' org.apache.cassandra.service.CassandraDaemon
