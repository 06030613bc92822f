"""Local images for `--provision compose --local-images`, built from what the native recipes build.

No image registry is reachable here, so the official images of compose/docker-compose.yaml cannot be pulled.
compose/local/local-images.yaml swaps them for `authzbench-local/NAME:TAG` images: one base (a Debian rootfs
from debootstrap, with PostgreSQL 15 and a JRE, `docker import`ed) and one small Dockerfile per server under
compose/local/NAME/, its build context filled with the native recipe's artifacts (the cached Go engines'
binaries, a Java server's jars: each system's `image_files`). Every tag is a content hash of what went in, so
an image is built once and reused until an input changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from authzbench.core.console import say
from authzbench.core.errors import BackendUnavailable
from authzbench.provision.base import apt_install, build_lock, cache_dir
from authzbench.systems import load, systems

LOCAL_DIR = Path(__file__).resolve().parents[2] / "compose" / "local"
OVERRIDE_FILE = LOCAL_DIR / "local-images.yaml"
REPO = "authzbench-local"
SUITE = "bookworm"
# PostgreSQL for the database services, a JRE for the Java servers, curl for healthchecks.
BASE_POSTGRES = "15"
BASE_PACKAGES = (
    f"postgresql-{BASE_POSTGRES}", "openjdk-17-jre-headless", "curl", "ca-certificates", "procps")
_REF = re.compile(r"^authzbench-local/([a-z0-9-]+):\$\{(AUTHZBENCH_LOCAL_[A-Z0-9_]+):-[^}]*\}$")


def tag_var(image: str) -> str:
    """The variable local-images.yaml reads NAME's tag from."""
    return "AUTHZBENCH_LOCAL_" + image.upper().replace("-", "_")


def override_images() -> dict[str, str]:
    """service -> local image name, as compose/local/local-images.yaml swaps them."""
    out = {}
    for svc, body in yaml.safe_load(OVERRIDE_FILE.read_text())["services"].items():
        m = _REF.match(str((body or {}).get("image", "")))
        if not m or m.group(2) != tag_var(m.group(1)):
            raise BackendUnavailable(f"{OVERRIDE_FILE.name}: service {svc} must name an image as "
                                     f"authzbench-local/NAME:${{AUTHZBENCH_LOCAL_NAME:-unbuilt}}")
        out[svc] = m.group(1)
    return out


# the artifacts each image copies in (from the native recipes' caches), as the systems declare them --------

def artifacts(image: str) -> dict[str, Path]:
    """What IMAGE's build context gets beside compose/local/IMAGE/: the `image_files` of a system running it
    (none declared: nothing, as the database image needs nothing but the base)."""
    for s in systems().values():
        if s.image == image and s.image_files:
            return load(s.image_files)()
    if not any(s.image == image for s in systems().values()):
        raise BackendUnavailable(f"--local-images: no system declares the local image {image!r}")
    return {}


HEALTH_PROBE_VERSION = "v0.4.61"


def local_versions() -> dict[str, str]:
    """versions.env's names with what the local images really run: endpoints and reports must name the
    base image's Debian PostgreSQL and the native builds, not the official images' pins they stand in for."""
    out: dict[str, str] = {}
    for s in systems().values():
        if s.image_versions:
            out.update(load(s.image_versions)())
    return out


def health_probe() -> Path:
    """grpc_health_probe, which the official Go engines' images carry for their healthchecks (a recipe's
image_files adds it)."""
    from authzbench.provision.gobuild import GoModule, go_module_binary

    return go_module_binary(GoModule("grpc_health_probe", "github.com/grpc-ecosystem/grpc-health-probe",
                                     HEALTH_PROBE_VERSION, HEALTH_PROBE_VERSION, ".", expect="~1 min"))


# hashing and the engine ------------------------------------------------------------------------

def _digest(paths: list[Path], h: hashlib._Hash | None = None) -> hashlib._Hash:
    h = h or hashlib.sha256()
    for p in paths:
        files = sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else [p]
        for f in files:
            h.update(str(f.relative_to(p) if p.is_dir() else f.name).encode())
            with open(f, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
    return h


def _docker(*args: str, stdin=None, what: str) -> str:
    out = subprocess.run(
        ["docker", *args], stdin=stdin, capture_output=True, text=stdin is None, timeout=1800)
    if out.returncode != 0:
        err = out.stderr if isinstance(out.stderr, str) else out.stderr.decode(errors="replace")
        raise BackendUnavailable(f"{what} failed: {' '.join(err.split())[:300]}")
    return out.stdout if isinstance(out.stdout, str) else out.stdout.decode(errors="replace")


def image_exists(ref: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode == 0


def apt_mirror() -> str:
    """The Debian mirror this machine's apt already uses (debootstrap fetches from the same place)."""
    for f in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        text = f.read_text(errors="replace") if f.is_file() else ""
        m = re.search(r"^URIs:\s*(\S+)\s*\nSuites:[^\n]*\b" + SUITE + r"\b", text, re.M) or re.search(
            r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+" + SUITE + r"\s", text, re.M)
        if m and "security" not in m.group(1):
            return m.group(1)
    raise BackendUnavailable(f"no Debian {SUITE} apt source found to debootstrap the local base image from")


def base_image() -> str:
    """authzbench-local/base:HASH, a Debian rootfs with BASE_PACKAGES, made once per engine."""
    key = hashlib.sha256(json.dumps([SUITE, BASE_PACKAGES]).encode()).hexdigest()[:16]
    ref = f"{REPO}/base:{key}"
    if image_exists(ref):
        return ref
    apt_install(["debootstrap"])
    root = cache_dir() / "images"
    with build_lock(root, "base"):
        if image_exists(ref):
            return ref
        rootfs = Path(tempfile.mkdtemp(prefix="rootfs-", dir=root))
        log = root / "debootstrap.log"
        t0 = time.monotonic()
        say(f"local images: debootstrap {SUITE} with {', '.join(BASE_PACKAGES)} (once per engine; ~1-3 min; "
            f"log {log})")
        try:
            with open(log, "ab") as fh:
                rc = subprocess.run(
                    ["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", SUITE,
                     str(rootfs), apt_mirror()],
                    stdout=fh, stderr=subprocess.STDOUT).returncode
            if rc != 0:
                raise BackendUnavailable(f"debootstrap failed with exit code {rc} (see {log})")
            for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "var/lib/postgresql/15"):
                shutil.rmtree(rootfs / junk, ignore_errors=True)
            tar = subprocess.Popen(
                ["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
            _docker("import", "-", ref, stdin=tar.stdout, what="docker import of the base rootfs")
            tar.wait()
        finally:
            shutil.rmtree(rootfs, ignore_errors=True)
        say(f"local images: {ref} made in {time.monotonic() - t0:.0f} s")
    return ref


def build(image: str) -> str:
    """authzbench-local/IMAGE:HASH, built from compose/local/IMAGE/ plus its artifacts unless it exists."""
    base = base_image()
    src = LOCAL_DIR / image
    files = artifacts(image)
    h = _digest([src, *files.values()])
    h.update(base.encode())
    ref = f"{REPO}/{image}:{h.hexdigest()[:16]}"
    if image_exists(ref):
        return ref
    root = cache_dir() / "images"
    with build_lock(root, image):
        if image_exists(ref):
            return ref
        ctx = Path(tempfile.mkdtemp(prefix=f"ctx-{image}-", dir=root))
        t0 = time.monotonic()
        say(f"local images: building {ref} from {src.relative_to(LOCAL_DIR.parent.parent)}")
        try:
            shutil.copytree(src, ctx, dirs_exist_ok=True)
            for name, path in files.items():
                (shutil.copytree if path.is_dir() else shutil.copy2)(path, ctx / name)
            # The legacy builder: the Debian engine has no BuildKit, and the build needs no network.
            env = {**os.environ, "DOCKER_BUILDKIT": "0"}
            out = subprocess.run(["docker", "build", "-q", "--network", "none", "--build-arg", f"BASE={base}",
                                  "-t", ref, str(ctx)], capture_output=True, text=True, env=env, timeout=1800)
            if out.returncode != 0:
                raise BackendUnavailable(
                    f"docker build of {ref} failed: {' '.join(out.stderr.split())[-300:]}")
        finally:
            shutil.rmtree(ctx, ignore_errors=True)
        say(f"local images: {ref} built in {time.monotonic() - t0:.0f} s")
    return ref


def ensure(services: list[str]) -> dict[str, str]:
    """Build the local images `services` need; the tag variables local-images.yaml interpolates."""
    wanted = override_images()
    missing = [s for s in services if s not in wanted]
    if missing:
        raise BackendUnavailable(
            f"--local-images: no local image for compose service(s) {', '.join(missing)} "
            f"(compose/local/local-images.yaml swaps {', '.join(sorted(wanted))})")
    return {tag_var(img): build(img).rpartition(":")[2] for img in dict.fromkeys(wanted[s] for s in services)}
