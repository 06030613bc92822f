"""The postgres backend's native recipe: a private cluster (provision/pgcluster.py) tuned for benchmarking."""

from __future__ import annotations

from authzbench.provision.base import Deployment, StartContext
from authzbench.provision.images import BASE_POSTGRES
from authzbench.provision.pgcluster import BENCH_SETTINGS, start_cluster

# One connection per worker, plus the run's own (server info, loaded-hash check) at most.
WORKER_LIMIT = int(BENCH_SETTINGS["max_connections"]) - 1


def start(ctx: StartContext) -> Deployment:
    cluster = start_cluster(ctx, name="postgres")
    # The password travels as its own key so Deployment.public_endpoint() masks it in manifests.
    endpoint = {"dsn": cluster.public_dsn, "password": cluster.password, "server_settings": cluster.settings}
    # No notes: server_info() already reports the version and the settings (from the endpoint).
    dep = Deployment("postgres", "native", endpoint, pids=[cluster.pid])
    dep.on_stop(cluster.stop)
    return dep


def image_versions() -> dict[str, str]:
    """versions.env's name with what the local image runs: the base image's Debian PostgreSQL."""
    return {"POSTGRES_VERSION": BASE_POSTGRES}
