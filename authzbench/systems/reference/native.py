"""The reference backend runs in-process: nothing to start."""

from __future__ import annotations

import os

from authzbench.provision.base import Deployment, StartContext


def start(ctx: StartContext) -> Deployment:
    return Deployment("reference", "native", {}, pids=[os.getpid()], notes=["in-process, no server"])
