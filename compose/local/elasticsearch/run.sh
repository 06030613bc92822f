#!/bin/sh
# The node in the foreground as PID 1 (SIGTERM closes it through its shutdown hook), settings as the
# native recipe's, but listening on the container's interfaces. Arguments: a command to run instead
# (the compose file's one-shot setup service).
set -eu
if [ "$#" -gt 0 ]; then
  exec "$@"
fi
home=/usr/share/elasticsearch
mkdir -p "$home/config" "$home/data" "$home/logs"
# shellcheck disable=SC2046,SC2086 # one JVM flag per line of jvm.options; ES_JAVA_OPTS as the official image
exec java ${ES_JAVA_OPTS:--Xms1g -Xmx1g} $(cat /opt/elasticsearch/conf/jvm.options) \
  -cp '/opt/elasticsearch/es-launcher.jar:/opt/elasticsearch/lib/*' authzbench.EsNode \
  "path.home=$home" "path.data=$home/data" "path.logs=$home/logs" node.name=authzbench cluster.name=authzbench \
  network.host=0.0.0.0 http.port=9200 transport.port=9300 discovery.type=single-node \
  cluster.routing.allocation.disk.threshold_enabled=false action.auto_create_index=false
