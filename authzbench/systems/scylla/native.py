"""Apache Cassandra 5.0.9 (the CQL engine available here; ScyllaDB runs under compose/external).

No registry ships ScyllaDB or a Cassandra tarball, but Cassandra's server jars are on Maven Central:
Maven copies them into the cache dir once; the provisioner writes cassandra.yaml and logback.xml for
a single node on 127.0.0.1 with private ports, and starts CassandraDaemon with the JPMS flags of
Cassandra's own conf/jvm17-server.options (without them it fails on sun.nio.ch.DirectBuffer).

The bulk path (authzbench/systems/scylla/adapter.py): a small Java helper, `cassandra_bulk/SSTableBulk.java`
(shipped with the package), compiled once against those jars with javac into the cache dir, writes
SSTables from rows streamed to it and imports them through the node's JMX port (loopback only), as
`nodetool import` does.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from pathlib import Path

from authzbench.core.console import say
from authzbench.provision.base import (
    Deployment,
    StartContext,
    build_once,
    cache_dir,
    free_port,
    port_open,
    require_java,
    run,
    spawn,
    stamp_ok,
    stop_pid,
    wait_until,
    write_stamp,
)

CASSANDRA_VERSION = "5.0.9"
BULK_SRC = Path(__file__).resolve().parent / "cassandra_bulk" / "SSTableBulk.java"
# The helper's own logging: warnings only (Cassandra's client-mode start logs ~40 lines at DEBUG).
BULK_LOGBACK = """<configuration>
  <appender name="ERR" class="ch.qos.logback.core.ConsoleAppender"><target>System.err</target>
    <encoder><pattern>%-5level %msg%n</pattern></encoder></appender>
  <root level="WARN"><appender-ref ref="ERR" /></root>
</configuration>
"""

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>authzbench</groupId><artifactId>cassandra-jars</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.cassandra</groupId><artifactId>cassandra-all</artifactId>
      <version>{version}</version></dependency>
  </dependencies>
</project>
"""

# The JPMS block of Cassandra 5.0's conf/jvm17-server.options.
JPMS_FLAGS = [
    "-Djdk.attach.allowAttachSelf=true",
    *[f"--add-exports={m}=ALL-UNNAMED"
      for m in (
          "java.base/jdk.internal.misc", "java.management.rmi/com.sun.jmx.remote.internal.rmi",
          "java.rmi/sun.rmi.registry", "java.rmi/sun.rmi.server", "java.sql/java.sql",
          "java.base/java.lang.ref", "jdk.unsupported/sun.misc", "jdk.compiler/com.sun.tools.javac.file",
          "jdk.attach/sun.tools.attach")],
    *[f"--add-opens={m}=ALL-UNNAMED"
      for m in (
          "java.base/java.lang.module", "java.base/jdk.internal.loader", "java.base/jdk.internal.ref",
          "java.base/jdk.internal.reflect", "java.base/jdk.internal.math", "java.base/jdk.internal.module",
          "java.base/jdk.internal.util.jar", "jdk.management/com.sun.management.internal",
          "java.base/sun.nio.ch", "java.base/java.io", "java.base/java.lang.reflect",
          "jdk.compiler/com.sun.tools.javac", "java.base/java.lang", "java.base/java.util")],
    # Netty settings of the same file: direct buffers through Unsafe, pre-4.1.75 allocator defaults.
    "-Dio.netty.tryReflectionSetAccessible=true", "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
]

YAML = """cluster_name: authzbench
num_tokens: 16
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
data_file_directories: [{dir}/data]
commitlog_directory: {dir}/commitlog
saved_caches_directory: {dir}/saved_caches
hints_directory: {dir}/hints
cdc_raw_directory: {dir}/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:{storage_port}"
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
storage_port: {storage_port}
native_transport_port: {cql_port}
start_native_transport: true
endpoint_snitch: SimpleSnitch
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
auto_snapshot: false
disk_failure_policy: stop
commit_failure_policy: stop
# A node for a 2-core machine shared with the client: small caches, no snapshots on DROP (tests and
# --reload drop keyspaces), no per-batch size warnings for our single-partition batches of ~50 rows
# (~1 KiB). Memtables of 512/256 MiB in a 1.5 GiB heap flush less often during a load: baseline (13.2M
# rows written) loaded in 48.7 s fresh / 36.2 s reloaded, against 55.1 / 44.3 s with 256/128 MiB in 768M.
memtable_heap_space: 512MiB
memtable_offheap_space: 256MiB
key_cache_size: 32MiB
row_cache_size: 0MiB
counter_cache_size: 0MiB
concurrent_reads: 16
concurrent_writes: 16
concurrent_compactors: 1
batch_size_warn_threshold: 64KiB
snapshot_before_compaction: false
uuid_sstable_identifiers_enabled: false
# A new single-node 5.0 cluster, no 4.x node to stay readable by: SSTables in 5.0's own format (oa), the
# one the bulk helper's writer produces; in the default CASSANDRA_4 mode the node writes nb and its
# import skips oa files ("No new SSTables were found").
storage_compatibility_mode: NONE
"""

LOGBACK = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{dir}/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{{ISO8601}} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE" /></root>
</configuration>
"""


def container_yaml(data_dir: str) -> str:
    """The same node settings for a container (compose --local-images): CQL on every interface of the
    container, announced to drivers as 127.0.0.1 (the port compose publishes there), as ScyllaDB's
    --broadcast-rpc-address in the compose file."""
    text = YAML.format(dir=data_dir, storage_port=7000, cql_port=9042)
    return text.replace(
        "rpc_address: 127.0.0.1\n", "rpc_address: 0.0.0.0\nbroadcast_rpc_address: 127.0.0.1\n")


def jars() -> Path:
    """Cassandra's runtime jars from Maven Central, copied once into the cache dir."""
    _java, mvn = require_java()
    root = cache_dir() / f"cassandra-{CASSANDRA_VERSION}"
    lib, stamp = root / "lib", root / "jars.stamp"
    if stamp_ok(stamp, CASSANDRA_VERSION) and lib.is_dir():
        return lib
    root.mkdir(parents=True, exist_ok=True)
    (root / "pom.xml").write_text(POM.format(version=CASSANDRA_VERSION))
    say(f"cassandra: fetching cassandra-all {CASSANDRA_VERSION} and its runtime jars from Maven Central "
        "(~67 MB)")
    run([mvn, "-q", "-B", f"-Dmaven.repo.local={cache_dir() / 'm2'}", "dependency:copy-dependencies",
         "-DincludeScope=runtime", f"-DoutputDirectory={lib}"], cwd=root, log=root / "mvn.log",
        what="mvn dependency:copy-dependencies (cassandra-all)")
    write_stamp(stamp, CASSANDRA_VERSION)
    return lib


def bulk_tool() -> list[str]:
    """The command that runs the SSTable helper (`... write DIR` / `... import ...`), compiled once per
    machine into cache_dir()/cassandra-bulk-VERSION; rebuilt when its source changes."""
    java, _ = require_java()
    javac = shutil.which("javac") or str(Path(java).resolve().parent / "javac")
    lib = jars()
    root = cache_dir() / f"cassandra-bulk-{CASSANDRA_VERSION}"
    stamp = root / "build.stamp"
    want = f"{CASSANDRA_VERSION} {hashlib.sha256(BULK_SRC.read_bytes()).hexdigest()[:16]}"

    def build() -> None:
        classes = root / "classes"
        shutil.rmtree(classes, ignore_errors=True)
        say(f"cassandra: compiling the SSTable bulk helper against cassandra-all {CASSANDRA_VERSION} "
            "(once per machine, ~10 s)")
        run([javac, "--release", "17", "-nowarn", "-cp", f"{lib}/*", "-d", str(classes), str(BULK_SRC)],
            log=root / "build.log", what="javac SSTableBulk.java (cassandra bulk helper)", timeout=600)
        (root / "logback.xml").write_text(BULK_LOGBACK)

    build_once(root, stamp, want, "cassandra-bulk", build)
    # 1 GiB: the blocks in flight (one a writer thread, a thread a core, plus 2 queued), each <= 2^20 rows of
    # 3 int arrays (12 MiB), and the SSTables' writers; the xl stream peaked at 629 MiB resident.
    return [java, "-Xms256M", "-Xmx1G", "-XX:+UseG1GC", *JPMS_FLAGS,
            f"-Dlogback.configurationFile=file://{root / 'logback.xml'}",
            "-cp", f"{root / 'classes'}:{lib}/*", "authzbench.SSTableBulk"]


def helper_command() -> list[str]:
    """A command that runs the SSTable helper, building it first when it is not built yet: what an endpoint
    read from a compose file or a URL carries, so the helper is built only when SSTables are loaded."""
    return [sys.executable, "-m", __name__]


def start(ctx: StartContext) -> Deployment:
    java, _ = require_java()
    lib = jars()
    node = ctx.dir("cassandra")
    for d in ("data", "commitlog", "saved_caches", "hints", "cdc_raw", "logs"):
        (node / d).mkdir(exist_ok=True)
    storage_port, cql_port, jmx_port = free_port(), free_port(), free_port()
    bulk = bulk_tool()
    (node / "cassandra.yaml").write_text(YAML.format(dir=node, storage_port=storage_port, cql_port=cql_port))
    (node / "logback.xml").write_text(LOGBACK.format(dir=node / "logs"))
    heap = ctx.options.get("cassandra_heap", "1536M")
    # No -XX:TieredStopAtLevel=1 (C1 only, quicker start): with C2 the baseline load took 55.1 s
    # fresh / 44.3 s reloaded, against 70.4 / 84.5 s, for ~1 s more start-up.
    cmd = [
        java, f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-Xss256k", *JPMS_FLAGS,
        f"-Dcassandra.config=file://{node / 'cassandra.yaml'}",
        f"-Dlogback.configurationFile=file://{node / 'logback.xml'}", f"-Dcassandra.logdir={node / 'logs'}",
        f"-Dcassandra.storagedir={node}", "-Dcassandra-foreground=yes",
        "-Dcassandra.skip_wait_for_gossip_to_settle=0", "-Dcassandra.ring_delay_ms=1000",
        f"-Dcassandra.jmx.local.port={jmx_port}", "-cp", f"{lib}/*",
        "org.apache.cassandra.service.CassandraDaemon"]
    log = node / "logs" / "stdout.log"
    say(f"cassandra {CASSANDRA_VERSION}: starting on 127.0.0.1:{cql_port} (CQL ready in ~15 s)")
    t0 = time.perf_counter()
    proc = spawn(cmd, log=log)
    # data_dir: lets the backend measure its footprint on disk when the node is local. jmx_port and
    # bulk_cmd: the SSTable load path (JMX listens on loopback only: cassandra.jmx.local.port).
    dep = Deployment(
        "scylla", "native",
        {"hosts": ["127.0.0.1"], "port": cql_port, "keyspace": "authzbench", "data_dir": str(node),
         "jmx_port": jmx_port, "bulk_cmd": bulk},
        pids=[proc.pid],
        notes=[f"Apache Cassandra {CASSANDRA_VERSION} (CQL, standing in for ScyllaDB): "
               f"single node, {heap} heap, jars from Maven Central"])
    dep.on_stop(lambda: stop_pid(proc.pid, timeout=30))  # SIGTERM: the node drains and exits in ~7 s
    try:
        # The port opens slightly before the node answers queries: ready = a driver session gets a row.
        wait_until(lambda: port_open(cql_port) and _cql_answers(cql_port), timeout=180, what="cassandra",
                   proc=proc, log=node / "logs" / "system.log", interval=0.5)
    except BaseException:
        dep.stop()
        raise
    dep.notes.append(f"CQL ready in {time.perf_counter() - t0:.1f} s")
    say(f"cassandra {CASSANDRA_VERSION}: CQL ready in {time.perf_counter() - t0:.1f} s (pid {proc.pid})")
    return dep


def _cql_answers(port: int) -> bool:
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    profile = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy(["127.0.0.1"]), request_timeout=5)
    cluster = Cluster(["127.0.0.1"], port=port, connect_timeout=3, control_connection_timeout=3,
                      execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    try:
        return (
            cluster.connect().execute("SELECT release_version FROM system.local", timeout=5).one() is not None
        )
    finally:
        cluster.shutdown()


if __name__ == "__main__":  # helper_command(): build if needed, then become the helper with these arguments
    cmd = bulk_tool()
    os.execvp(cmd[0], [*cmd, *sys.argv[1:]])


def built() -> bool:
    """Nothing left to build: the two stamps jars() and bulk_tool() check are this version's."""
    bulk = f"{CASSANDRA_VERSION} {hashlib.sha256(BULK_SRC.read_bytes()).hexdigest()[:16]}"
    return (stamp_ok(cache_dir() / f"cassandra-{CASSANDRA_VERSION}" / "jars.stamp", CASSANDRA_VERSION)
            and stamp_ok(cache_dir() / f"cassandra-bulk-{CASSANDRA_VERSION}" / "build.stamp", bulk))


def tools() -> dict[str, list[str]]:
    """The tool the adapter runs beside its server, for an endpoint that does not name it already (a native
    start names the built helper; compose and external endpoints get one that builds it when first run)."""
    return {"bulk_cmd": helper_command()}


def image_files() -> dict[str, Path]:
    """What its local image copies in (--local-images): Cassandra's jars and its configuration."""
    conf = cache_dir() / "images" / "cassandra-conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "cassandra.yaml").write_text(container_yaml("/var/lib/scylla"))
    (conf / "logback.xml").write_text(LOGBACK.format(dir="/var/lib/scylla/logs"))
    (conf / "jvm.options").write_text("\n".join(JPMS_FLAGS) + "\n")
    return {"lib": jars(), "conf": conf}


def image_versions() -> dict[str, str]:
    """versions.env's name with what the local image runs: Cassandra, not the ScyllaDB image's pin."""
    return {"SCYLLA_VERSION": f"cassandra-{CASSANDRA_VERSION}"}

