"""Loading a backend: schema, bulk load with progress, build, mark loaded; skipped when the same dataset is
already loaded; each ingest variant measured by a full reload first; a load stopped at --max-load-minutes
(or projected past it) with its rate and projection recorded.

The backend's `load` and `build` only say what to do (backends/base.py: Batches of Batch or Stream, Steps);
this module sends and times all of it (`run_load`, `run_build`): every batch and step through
measure/timing.py's `timed`, the one measurement the ops use, so no backend reads a clock."""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from typing import Any

from authzbench.backends.base import (
    Backend,
    Batch,
    Batches,
    BuildStats,
    LoadStats,
    Progress,
    Step,
    Stream,
    no_progress,
)
from authzbench.backends.registry import entry
from authzbench.core.console import console, say
from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.core.records import BackendError, Ingest, IngestBounded, IngestSkipped, Monitor, as_dict
from authzbench.measure.timing import Timed, timed
from authzbench.results.store import RunStore
from authzbench.run.servers import Session, monitor_for, state_file
from authzbench.schema.dataset import Dataset


def load_backend(sess: Session, ds: Dataset, store: RunStore | None, reload: bool) -> dict:
    """Create schema, bulk load, build; skipped when the same dataset hash is already loaded. A backend's
    ingest variants are each measured by a full reload before the default path loads last."""
    name = sess.name
    with sess.backend(dataset_path=str(ds.path)) as b:
        if not reload and b.loaded_hash() == ds.hash:
            say(f"{name}: dataset {ds.hash[:12]} already loaded, not reloading (--reload to force)")
            skipped = IngestSkipped(backend=name, dataset_hash=ds.hash,
                                    previous=_prior_load(name, sess.dep.mode, ds.hash))
            if store:
                store.append(skipped)
            return as_dict(skipped)
        variants = sess.servers.selected_variants(type(b).ingest_variants)
    for label, options in variants.items():
        try:
            _load_once(sess, ds, store, label, options)
        except LoadTooSlow as e:  # a slow alternative path must not cost the default one its run
            say(f"[yellow]{e}[/yellow]")
            if store:
                store.append(BackendError(backend=name, stage=f"ingest via {label}", message=str(e)))
    rec = as_dict(_load_once(sess, ds, store, None, {}))
    if not entry(name).in_process:
        state_file(name).with_suffix(".load.json").write_text(json.dumps({**rec, "provision": sess.dep.mode}))
    return rec


def _prior_load(name: str, mode: str, dataset_hash: str) -> dict | None:
    """The load record of the data a skipped load reuses: only if that load was of this dataset on a server
    provisioned the same way (a compose run once reported the native SSTable load as its own)."""
    path = state_file(name).with_suffix(".load.json")
    prior = json.loads(path.read_text()) if path.is_file() else {}
    return prior if prior.get("provision") == mode and prior.get("dataset_hash") == dataset_hash else None


def _load_once(sess: Session, ds: Dataset, store: RunStore | None, variant: str | None,
               options: dict[str, Any]) -> Ingest:
    """Drop, create schema, load through the default path or an ingest variant, build, mark loaded."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    name = sess.name
    what = f"{name} via {variant}" if variant else name
    with sess.backend(dataset_path=str(ds.path), **options) as b:
        info = b.server_info()
        b.drop()
        b.create_schema()
        total = ds.total_relationships
        with Progress(
            TextColumn(f"[bold]{what}[/] load"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,}"),
            # nests under bench's bar
            TimeRemainingColumn(), transient=True, console=console) as prog:
            task = prog.add_task("load", total=total)
            t0 = time.perf_counter()
            phase = f"{name}/ingest" + (f" via {variant}" if variant else "")
            bound = LoadBound(what, total, sess.servers.max_load_minutes * 60)
            with monitor_for(sess, lambda s: store and store.append(Monitor(backend=name, phase=phase, **s))):
                try:
                    stats = run_load(b, ds, lambda n: (prog.advance(task, n), bound(n)))
                except LoadTooSlow as e:
                    if store:
                        store.append(IngestBounded(backend=name, variant=variant, dataset_hash=ds.hash,
                                                   **e.figures))
                    raise
                load_s = time.perf_counter() - t0
                t1 = time.perf_counter()
                build = run_build(b)
                build_s = time.perf_counter() - t1
        b.mark_loaded(ds.hash)
        footprint = b.footprint()
    rec = Ingest(
        backend=name, variant=variant, server=asdict(info), dataset_hash=ds.hash, relationships=total,
        acl_relationships=ds.acl_relationships, rows=stats.rows, documents=stats.documents,
        batch_rows=stats.batch_rows, batch_seconds=stats.batch_seconds, load_seconds=load_s,
        build=asdict(build) if build else None, build_seconds=build_s, footprint_bytes=footprint,
        notes=stats.notes, start_seconds=getattr(sess, "start_seconds", None))
    say(f"{what}: loaded {total:,} relationships in {load_s:.1f} s "
        f"({total / max(load_s, 1e-9):,.0f}/s) + build {build_s:.1f} s")
    if store:
        rec = store.append(rec)
    return rec


class LoadTooSlow(UserError):
    """A load stopped at --max-load-minutes (or projected past it): its figures go to the results."""

    def __init__(self, message: str, figures: dict[str, float]):
        super().__init__(message)
        self.figures = figures


class LoadBound:
    """Called with each progress step of a load: stops it (raises LoadTooSlow from the loading thread)
    when the elapsed time passes the bound, or, once progress has been reported for 30 s or a tenth of
    the bound, when the rate since the first report projects the whole load past 1.1x the bound (Cassandra
    loaded baseline at 2.5k/s: at `large` that is ~35 min, known after the first 30 s), or when the
    machine's available memory falls under MEMORY_FLOOR of its total. A step of 0 before the first
    relationship is a set-up heartbeat: judged on time and memory, not a rate."""

    EARLY_S, OVER = 30.0, 1.1  # judged after this long (or a tenth of the bound), past this multiple of it
    # Elasticsearch's xl set-up grew this process to 17.4 GiB of 23.5 GiB (3 GiB, 13%, left) in 4 min before
    # its first document went out; I stopped it by hand. 15% stops such a load before the machine swaps.
    MEMORY_FLOOR, MEMORY_EVERY_S = 0.15, 1.0  # read /proc/meminfo at most once a second

    def __init__(
        self, what: str, total: int, bound_s: float, memory: Callable[[], tuple[int, int]] | None = None):
        self.what, self.total, self.bound_s = what, total, bound_s
        self.done, self.t0 = 0, time.perf_counter()
        self.first: tuple[float, int] | None = None
        self.memory, self.memory_at = memory or _memory, -math.inf

    @classmethod
    def judged_after(cls, bound_s: float) -> float:
        return min(cls.EARLY_S, bound_s / 10)

    @classmethod
    def expected_s(cls, projected_s: float, bound_s: float) -> float:
        """How long a load projected to take `projected_s` runs under this bound (for a sweep's estimate)."""
        if projected_s <= bound_s:
            return projected_s
        return bound_s if projected_s <= cls.OVER * bound_s else cls.judged_after(bound_s)

    def __call__(self, n: int) -> None:
        now = time.perf_counter()
        if self.first is None and (n or self.done):  # the rate is measured from the first progress: a
            # backend's set-up before it (Cassandra's closure: ~15 s at large) is not a rate
            self.first = (now, self.done)
        self.done += n
        elapsed, (t1, d1) = now - self.t0, self.first or (now, self.done)
        rate = (self.done - d1) / (now - t1) if now > t1 else 0.0
        projected = (now - self.t0) + (self.total - self.done) / rate if rate > 0 else float("inf")
        early = self.first is not None and now - t1 >= self.judged_after(self.bound_s) \
            and projected > self.OVER * self.bound_s
        figures = {"loaded": self.done, "relationships": self.total, "seconds": elapsed,
                   "rels_per_s": rate, "projected_seconds": projected, "bound_seconds": self.bound_s}
        if elapsed > self.bound_s or early:
            raise LoadTooSlow(
                f"{self.what}: load stopped after {elapsed:.0f} s at {self.done:,} of {self.total:,} "
                f"relationships ({rate:,.0f}/s); the whole load projects to {projected / 60:,.1f} min, over "
                "--max-load-minutes "
                f"{self.bound_s / 60:g}", figures)
        self._check_memory(now, figures)

    def _check_memory(self, now: float, figures: dict[str, float]) -> None:
        if now - self.memory_at < self.MEMORY_EVERY_S:
            return
        self.memory_at = now
        available, total = self.memory()
        if available < self.MEMORY_FLOOR * total:
            raise LoadTooSlow(
                f"{self.what}: load stopped after {figures['seconds']:.0f} s at {self.done:,} of "
                f"{self.total:,} relationships: the machine has {available / 2**30:.1f} of "
                f"{total / 2**30:.1f} GiB of memory "
                f"left, under the {self.MEMORY_FLOOR:.0%} floor", {**figures, "memory_left_bytes": available})


def _memory() -> tuple[int, int]:
    """(available, total) bytes of the machine's memory."""
    import psutil

    vm = psutil.virtual_memory()
    return int(vm.available), int(vm.total)


# sending and timing what a backend's load and build yield -------------------------------------------------

def run_load(b: Backend, ds: Dataset, progress: Progress = no_progress) -> LoadStats:
    """`b.load(ds)` sent and timed: its LoadStats with every batch's seconds and each step's in its notes, and
    where the time went on the client: this process's CPU seconds (the server's are in the ingest monitor)."""
    tally = Tally(progress)
    cpu0 = time.process_time()
    stats = drive(b.load(ds, progress), tally)
    stats.batch_seconds = tally.batch_seconds or stats.batch_seconds
    stats.notes = {**stats.notes, **tally.notes, "client_cpu_seconds": round(time.process_time() - cpu0, 3)}
    return stats


def run_build(b: Backend) -> BuildStats | None:
    """`b.build()` run and timed: its BuildStats, `seconds` the total of its steps, each step's in its
    notes."""
    tally = Tally()
    stats = drive(b.build(), tally)
    if stats is not None:
        stats.seconds = tally.steps_s
        stats.notes = {**stats.notes, **tally.notes}
    return stats


class Tally:
    """What one load or build measured: each batch's seconds, each named step's (summed by name), every
    step's total, and the progress in whole relationships (batches may advance it by fractions). Streams
    report from their own threads: one at a time; the first progress call that raises (the load's bound)
    stops the other streams at their next message and is the load's error."""

    def __init__(self, progress: Progress = no_progress) -> None:
        self.progress, self.batch_seconds, self.notes = progress, [], {}
        self.steps_s, self._owed = 0.0, 0.0
        self.stop, self.stopped_by = threading.Event(), None
        self._lock = threading.Lock()

    def add(self, name: str | tuple[str, ...], seconds: float) -> None:
        with self._lock:
            for key in (name,) if isinstance(name, str) else name:
                if key:
                    self.notes[key] = self.notes.get(key, 0.0) + seconds

    def batch(self, seconds: float, advance: float) -> None:
        with self._lock:
            self.batch_seconds.append(seconds)
            self._owed += advance
            whole = int(self._owed)
            self._owed -= whole
            try:
                if whole:
                    self.progress(whole)
            except BaseException as e:
                self.stopped_by = self.stopped_by or e
                self.stop.set()
                raise


def _seconds(t: Timed) -> float:
    return (t.end_ns - t.sent_ns) / 1e9


def drive(work: Any, tally: Tally) -> Any:
    """Run what a backend's load or build yields, handing each Step its result and each Batches its rows;
    returns the generator's value (or `work` itself, a backend that has nothing to time)."""
    if not isinstance(work, Generator):
        return work
    answer = None
    try:
        while True:
            try:
                item = work.send(answer)
            except StopIteration as done:
                return done.value
            answer = run_step(item, tally) if isinstance(item, Step) else send_batches(item, tally)
    finally:
        work.close()


def run_step(step: Step, tally: Tally) -> Any:
    t = timed(step.run)
    if t.error is not None:
        raise t.error
    tally.add(step.name, _seconds(t))
    tally.steps_s += _seconds(t)
    return t.answer


def send_batches(b: Batches, tally: Tally) -> int:
    """Every batch of `b` sent, at most `b.workers` in flight; the rows sent. Its wall seconds go to
    notes[b.name], the steps among its items left out when b.steps_apart."""
    before = tally.steps_s
    t = timed(lambda: _send_all(b, tally))
    if t.error is not None:
        raise t.error
    if b.name:
        tally.add(b.name, _seconds(t) - (tally.steps_s - before if b.steps_apart else 0.0))
    return t.answer


def _items(items: Iterable[Batch | Stream | Step], tally: Tally) -> Iterator[Batch | Stream]:
    """The batches of a Batches, its steps run (timed) in between and handed their results."""
    it, answer = iter(items), None
    while True:
        try:
            item = it.send(answer) if isinstance(it, Generator) else next(it)
        except StopIteration:
            return
        answer = None
        if isinstance(item, Step):
            answer = run_step(item, tally)
        else:
            yield item


def _send_all(b: Batches, tally: Tally) -> int:
    if b.workers <= 1:
        return sum(_collect(b, item, _send_one(item, tally), tally) for item in _items(b.items, tally))
    rows, ahead = 0, b.workers if b.ahead is None else b.ahead
    pool = ThreadPoolExecutor(b.workers, thread_name_prefix="load")
    pending: deque[tuple[Batch | Stream, Future]] = deque()
    try:
        for item in _items(b.items, tally):
            pending.append((item, pool.submit(_send_one, item, tally)))
            while len(pending) > b.workers + ahead:
                rows += _collect(b, *_oldest(pending), tally)
        while pending:
            rows += _collect(b, *_oldest(pending), tally)
    except BaseException:
        tally.stop.set()  # streams in flight end at their next message
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return rows


def _oldest(pending: deque) -> tuple[Batch | Stream, Timed]:
    item, fut = pending.popleft()
    return item, fut.result()


def _send_one(item: Batch | Stream, tally: Tally) -> Timed:
    return timed(item.send) if isinstance(item, Batch) else _stream(item, tally)


def _collect(b: Batches, item: Batch | Stream, t: Timed, tally: Tally) -> int:
    """A sent batch counted (its time, its progress, in order), or the load's one error line."""
    if t.error is not None:
        if tally.stopped_by is not None:  # our own stop cancelled the request: the reason, not the cancel
            raise tally.stopped_by
        raise BackendUnavailable(f"{b.who} of {item.rows} tuples failed: {b.why(t.error)}") from None
    if isinstance(item, Batch):
        tally.batch(_seconds(t), item.rows if item.advance is None else item.advance)
    return item.rows


def _stream(item: Stream, tally: Tally) -> Timed:
    """One client-streaming request: each message timed from the one before (the stream's start), its rows
    counted as it goes; the wait from the last message to the server's answer to notes[item.answer]."""
    last = [time.perf_counter_ns()]

    def messages() -> Iterator[Any]:
        for n, message in item.parts:
            if tally.stop.is_set():
                raise RuntimeError("load stopped")  # cancels this stream
            yield message
            now = time.perf_counter_ns()
            tally.batch((now - last[0]) / 1e9, n)
            last[0] = now

    t = timed(lambda: item.send(messages()))
    if t.error is None and item.answer:
        tally.add(item.answer, (t.end_ns - last[0]) / 1e9)
    return t
