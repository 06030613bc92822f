"""The results store: results/<run-id>/{manifest.json, records.jsonl}.

Records are appended one JSON line at a time and flushed as they are produced, so a crash or
Ctrl-C loses at most the interval in flight; `authzbench report` rebuilds everything from disk.
A committed copy of a run (reports/data/<run-id>/) keeps its records gzipped, records.jsonl.gz:
records() reads that when records.jsonl is absent. Every line is written and read through records.py,
the one schema of the record kinds.
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from authzbench.core.errors import UserError
from authzbench.core.records import Record, RecordError, decode, encode, validated
from authzbench.systems import systems

RECORDS = "records.jsonl"
MANIFEST = "manifest.json"

# Client stack recorded with every run: each backend's drivers (from the systems' declarations), then the
# libraries every measurement goes through.
DRIVERS = [*dict.fromkeys(d for e in systems().values() for d in e.drivers),
           "numpy", "pandas", "pyarrow", "hdrhistogram"]


def default_results_dir() -> Path:
    return Path(os.environ.get("AUTHZBENCH_RESULTS", "results"))


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


def source_commit(checkout: Path | None = None) -> dict[str, Any]:
    """The checkout's commit (`git rev-parse HEAD`) and whether it had uncommitted changes, so a figure can be
    traced to the code that measured it; "unknown" (dirty None) without git or outside a repository."""
    where = str(checkout or Path(__file__).resolve().parent)
    try:
        head = subprocess.run(
            ["git", "-C", where, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return {"commit": "unknown", "dirty": None}
        status = subprocess.run(["git", "-C", where, "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": "unknown", "dirty": None}
    return {"commit": head.stdout.strip(),
            "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def environment() -> dict[str, Any]:
    cpu_model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    os_name = platform.platform()
    try:
        rel = dict(
            line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
        os_name = rel.get("PRETTY_NAME", os_name).strip('"')
    except OSError:
        pass
    drivers = {}
    for d in DRIVERS:
        try:
            drivers[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            continue
    disk = psutil.disk_usage(str(Path.cwd()))
    return {
        "captured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "hostname": platform.node(),
        "cpu_model": cpu_model,
        "cpu_logical": psutil.cpu_count(logical=True),
        "cpu_physical": psutil.cpu_count(logical=False),
        "ram_bytes": psutil.virtual_memory().total,
        "disk_total_bytes": disk.total,
        "disk_free_bytes": disk.free,
        "os": os_name,
        "kernel": platform.release(),
        "arch": platform.machine(),
        "python": platform.python_version(),
        "drivers": drivers,
        "source": source_commit(),
    }


class ResultsUnwritable(UserError):
    """The results directory stopped taking writes (disk full, file size limit, removed): the run stops;
    every line written before stays readable."""


class RunStore:
    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    @classmethod
    def create(
        cls, results_dir: Path | None = None, run_id: str | None = None, config: dict | None = None
    ) -> RunStore:
        base = results_dir or default_results_dir()
        run_id = run_id or new_run_id()
        path = base / run_id
        n = 1
        while path.exists():  # two runs in the same second
            n += 1
            path = base / f"{run_id}-{n}"
        try:
            path.mkdir(parents=True)
        except OSError as e:
            raise UserError(f"cannot create results dir {path}: {e.strerror}") from None
        store = cls(path)
        store.write_manifest({"run_id": path.name, "environment": environment(), "config": config or {}})
        return store

    @classmethod
    def open(cls, path: Path) -> RunStore:
        if not (path / MANIFEST).is_file():
            raise UserError(f"no run at {path} (expected {MANIFEST})")
        return cls(path)

    @property
    def run_id(self) -> str:
        return self.path.name

    def write_manifest(self, manifest: dict) -> None:
        tmp = self.path / (MANIFEST + ".tmp")
        try:
            tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n")
            tmp.replace(self.path / MANIFEST)
        except OSError as e:  # the previous manifest stays: replace() is atomic
            raise ResultsUnwritable(f"cannot write {tmp}: {e.strerror or e}; the run stopped, what was "
                                    f"recorded before is kept") from None

    def manifest(self) -> dict:
        return json.loads((self.path / MANIFEST).read_text())

    def update_manifest(self, **fields: Any) -> None:
        with self._lock:
            m = self.manifest()
            m.update(fields)
            self.write_manifest(m)

    def append(self, record: Record) -> Record:
        """Writes one record (stamped with the time now unless it has one); returns it as written."""
        if record.ts is None:
            record = replace(record, ts=time.time())
        line = json.dumps(encode(record), default=str, separators=(",", ":"))
        with self._lock:
            try:
                with open(self.path / RECORDS, "a") as fh:
                    fh.write(line + "\n")
                    fh.flush()
            except OSError as e:  # a partial last line is skipped by records(): everything before counts
                raise ResultsUnwritable(f"cannot write {self.path / RECORDS}: {e.strerror or e}; the run "
                                        f"stopped, what was recorded before is kept") from None
        return record

    def records(self) -> Iterator[dict]:
        """Every record as a dict (as written, less the schema version), each checked against its kind's
        dataclass first (records.py): a line that does not fit stops the read with its line number."""
        for n, raw in self._lines():
            try:
                yield validated(raw)
            except RecordError as e:
                raise RecordError(f"{self._file()} line {n}: {e}") from None

    def typed(self) -> Iterator[Record]:
        """Every record as its kind's dataclass."""
        for n, raw in self._lines():
            try:
                yield decode(raw)
            except RecordError as e:
                raise RecordError(f"{self._file()} line {n}: {e}") from None

    def _file(self) -> Path:
        p = self.path / RECORDS
        return p if p.exists() else self.path / (RECORDS + ".gz")

    def _lines(self) -> Iterator[tuple[int, dict]]:
        p = self.path / RECORDS
        gz = self.path / (RECORDS + ".gz")
        if not p.exists() and not gz.exists():
            return
        with open(p) if p.exists() else gzip.open(gz, "rt") as fh:
            for n, line in enumerate(fh, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    yield n, json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a kill: everything before it still counts


def latest_run(results_dir: Path | None = None) -> Path:
    base = results_dir or default_results_dir()
    runs = sorted((p for p in base.glob("*") if (p / MANIFEST).is_file()), key=lambda p: p.stat().st_mtime)
    if not runs:
        raise UserError(f"no runs under {base}: run `authzbench bench` first")
    return runs[-1]
