"""Elasticsearch 7.17.29 (OSS server jars) natively: a real Elasticsearch node without a distribution.

No registry ships an Elasticsearch server distribution, but the OSS 7.17 server jars and the client
jars of four of its modules are on Maven Central. `es_launcher/` (shipped with the package) is a Maven
project whose EsNode subclasses Node to load those modules from the classpath, as the ES test
framework's MockNode does. The provisioner builds it once per machine into the cache dir (jar + runtime
jars), then trains an AppCDS archive with one start (the node is HTTP-ready in ~3.5 s instead of ~7 s),
and starts a single node on 127.0.0.1 with its data under the run dir. Stopped by PID (SIGTERM closes
the node through its shutdown hook).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import time
from pathlib import Path

from authzbench.core.console import say
from authzbench.provision.base import (
    Deployment,
    StartContext,
    build_once,
    cache_dir,
    free_port,
    require_java,
    run,
    run_group,
    spawn,
    stamp_ok,
    stop_pid,
    wait_until,
)

ES_VERSION = "7.17.29"
LAUNCHER_SRC = Path(__file__).resolve().parent / "es_launcher"
LABEL = f"Elasticsearch {ES_VERSION} OSS (native node from Maven Central jars)"
MAIN_CLASS = "authzbench.EsNode"

# The system properties of the distribution's config/jvm.options that matter without its launcher.
JVM_FLAGS = [
    "-XX:+UseG1GC", "-Xss1m", "-Djava.awt.headless=true", "-Dfile.encoding=UTF-8", "-Dio.netty.noUnsafe=true",
    "-Dio.netty.noKeySetOptimization=true", "-Dio.netty.recycler.maxCapacityPerThread=0",
    "-Dlog4j.shutdownHookEnabled=false", "-Dlog4j2.disable.jmx=true", "-Djava.locale.providers=SPI,COMPAT",
    "-XX:+HeapDumpOnOutOfMemoryError", "-XX:HeapDumpPath=/dev/null",
]


def _build_id() -> str:
    """The stamp: the ES version and a hash of the launcher's sources, so an edited launcher is rebuilt."""
    h = hashlib.sha256()
    for p in sorted(LAUNCHER_SRC.rglob("*")):
        if p.is_file() and "target" not in p.parts:
            h.update(p.relative_to(LAUNCHER_SRC).as_posix().encode() + b"\0" + p.read_bytes())
    return f"{ES_VERSION} launcher-{h.hexdigest()[:16]}"


def classpath(root: Path) -> str:
    """Explicit jar list in a fixed order: AppCDS accepts the archive only for the classpath it was made
    with."""
    jars = [root / "es-launcher.jar", *sorted((root / "lib").glob("*.jar"))]
    return ":".join(str(j) for j in jars)


def node_build() -> Path:
    """The launcher jar + runtime jars (+ AppCDS archive) in cache_dir()/elasticsearch-7.17.29, built once."""
    java, mvn = require_java()
    root = cache_dir() / f"elasticsearch-{ES_VERSION}"
    stamp, want = root / "build.stamp", _build_id()

    def build() -> None:
        t0 = time.monotonic()
        log = root / "build.log"
        src = root / "launcher"
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(LAUNCHER_SRC, src, ignore=shutil.ignore_patterns("target"))
        shutil.rmtree(root / "lib", ignore_errors=True)
        say(f"elasticsearch {ES_VERSION}: building the node launcher with Maven (once per machine; fetches "
            "the "
            f"server and module jars from Maven Central, ~35 MB, ~1 min; log {log})")
        run([mvn, "-q", "-B", f"-Dmaven.repo.local={cache_dir() / 'm2'}", "package",
             "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={root / 'lib'}"],
            cwd=src, log=log, what="mvn package (elasticsearch launcher)", timeout=1800)
        shutil.copy2(src / "target" / "es-launcher-1.jar", root / "es-launcher.jar")
        _train_cds(java, root, log)
        say(f"elasticsearch {ES_VERSION}: node built in {time.monotonic() - t0:.0f} s: {root}")

    build_once(root, stamp, want, "elasticsearch", build)
    return root


def _train_cds(java: str, root: Path, log: Path) -> None:
    """An AppCDS archive of the classes one start loads (~15 s once; halves every later start). Optional:
    a failed training run only costs start time, so it is logged and skipped."""
    archive = root / "es.jsa"
    archive.unlink(missing_ok=True)
    train = root / "cds-train"
    shutil.rmtree(train, ignore_errors=True)
    say(f"elasticsearch {ES_VERSION}: one training start for an AppCDS archive (~15 s)")
    cmd = [java, "-Xms512m", "-Xmx512m", *JVM_FLAGS, f"-XX:ArchiveClassesAtExit={archive}",
           "-Dauthzbench.exitAfterStart=true", "-cp", classpath(root), MAIN_CLASS,
           *_settings(train, free_port())]
    try:
        with open(log, "ab") as fh:
            rc = run_group(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=300)
    except subprocess.TimeoutExpired:
        rc = -1
    shutil.rmtree(train, ignore_errors=True)
    if rc != 0 or not archive.is_file():
        archive.unlink(missing_ok=True)
        say(f"elasticsearch: AppCDS training failed (exit {rc}); starting without an archive (see {log})")


def _settings(home: Path, http_port: int) -> list[str]:
    for d in ("config", "data", "logs"):
        (home / d).mkdir(parents=True, exist_ok=True)
    return [f"path.home={home}", f"path.data={home / 'data'}", f"path.logs={home / 'logs'}",
            "node.name=authzbench", "cluster.name=authzbench", "network.host=127.0.0.1",
            f"http.port={http_port}", "transport.port=0", "discovery.type=single-node",
            # the run dir's disk may be nearly full on a CI machine: never go read-only over it
            "cluster.routing.allocation.disk.threshold_enabled=false",
            # a write to a mistyped or dropped index fails instead of creating one with a guessed mapping
            "action.auto_create_index=false"]


def _health(port: int) -> bool:
    import json
    import urllib.request

    url = f"http://127.0.0.1:{port}/_cluster/health?wait_for_status=yellow&timeout=1s"
    with urllib.request.urlopen(url, timeout=3) as r:  # noqa: S310 - loopback, our own node
        return json.load(r).get("status") in ("yellow", "green")


def start(ctx: StartContext) -> Deployment:
    java, _ = require_java()
    root = node_build()
    home = ctx.dir("elasticsearch")
    port = free_port()
    heap = ctx.options.get("elasticsearch_heap", "1g")  # a 2-core machine shared with the client
    archive = root / "es.jsa"
    cds = ([f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
           if archive.is_file()
           else [])
    cmd = [java, f"-Xms{heap}", f"-Xmx{heap}", *JVM_FLAGS, *cds, "-cp", classpath(root), MAIN_CLASS,
           *_settings(home, port)]
    log = home / "logs" / "stdout.log"
    say(f"elasticsearch {ES_VERSION}: starting on 127.0.0.1:{port} ({heap} heap; HTTP ready in ~5 s)")
    t0 = time.monotonic()
    proc = spawn(cmd, log=log, cwd=home)
    dep = Deployment(
        "elasticsearch", "native", {"url": f"http://127.0.0.1:{port}", "distribution": "maven-jars"},
        pids=[proc.pid],
        notes=[f"{LABEL}: single node, {heap} heap, modules transport-netty4, "
               "mapper-extras, reindex, parent-join (no painless, no security)"])
    dep.on_stop(lambda: stop_pid(proc.pid, timeout=30))
    try:
        wait_until(lambda: _health(port), timeout=180, what="elasticsearch", proc=proc, log=log, interval=0.2)
    except BaseException:
        dep.stop()
        raise
    took = time.monotonic() - t0
    dep.notes.append(f"HTTP ready in {took:.1f} s{' (AppCDS archive)' if cds else ''}")
    say(f"elasticsearch {ES_VERSION}: ready in {took:.1f} s (pid {proc.pid})")
    return dep


def built() -> bool:
    """Nothing left to build: the launcher's stamp names this version and build."""
    return stamp_ok(cache_dir() / f"elasticsearch-{ES_VERSION}" / "build.stamp", _build_id())


def image_files() -> dict[str, Path]:
    """What its local image copies in (--local-images): the launcher, its jars and JVM options (the AppCDS
    archive names host paths: not copied)."""
    root = node_build()
    conf = cache_dir() / "images" / "elasticsearch-conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "jvm.options").write_text("\n".join(JVM_FLAGS) + "\n")
    return {"es-launcher.jar": root / "es-launcher.jar", "lib": root / "lib", "conf": conf}


def image_versions() -> dict[str, str]:
    """versions.env's name with what the local image runs: the OSS node built here."""
    return {"ELASTICSEARCH_VERSION": ES_VERSION}

