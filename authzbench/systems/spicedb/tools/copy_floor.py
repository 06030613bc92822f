"""The floor under SpiceDB's bulk import on this machine (issue 30). SpiceDB's PostgreSQL datastore imports by
COPY into relation_tuple (v1.54.0 internal/datastore/postgres/readwrite.go, BulkLoad), so a COPY of the same
rows into a table LIKE relation_tuple (its 8 indexes included), in SpiceDB's own PostgreSQL, with none of
SpiceDB's work in the way, is the fastest its import can be here.

    python -m authzbench.systems.spicedb.tools.copy_floor DATASET [--streams 2]

Uses the spicedb-pg server that `authzbench up spicedb-pg` / `prepare` left running (its datastore), builds
the rows as CSV before the clock starts, COPYs them over `streams` connections at once, prints the rate and
drops the table again.
"""

from __future__ import annotations

import argparse
import io
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from authzbench.core.errors import UserError
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import RelationDef, relation_defs

TABLE = "copy_floor"
COLS = "namespace, object_id, relation, userset_namespace, userset_object_id, userset_relation, caveat_name"


def csv_block(d: RelationDef, objects, subjects) -> bytes:
    """One relation's rows as SpiceDB stores them (an empty subject relation is "...", no caveat: "")."""
    n = len(objects)
    sub = pa.array(["*"] * n) if d.wildcard else pc.cast(pa.array(subjects), pa.string())
    t = pa.table({"ns": pa.array([d.object_type] * n), "id": pc.cast(pa.array(objects), pa.string()),
                  "rel": pa.array([d.relation] * n), "sns": pa.array([d.subject_type] * n), "sid": sub,
                  "srel": pa.array([d.subject_relation or "..."] * n), "caveat": pa.array([""] * n)})
    buf = io.BytesIO()
    pacsv.write_csv(t, buf, pacsv.WriteOptions(include_header=False))
    return buf.getvalue()


def copy_floor(ds: Dataset, dsn: str, password: str | None, streams: int, say=print) -> dict:
    """COPY every relationship of `ds` into a table LIKE relation_tuple in the datastore at `dsn` (the
    endpoint's datastore_dsn and datastore_password, as pgsize reads them); {rows, seconds, per_s,
    streams}."""
    defs = relation_defs(ds.model)
    blocks = [(len(df), csv_block(defs[name], df["object"].to_numpy(), df["subject"].to_numpy()))
              for name in ds.authz_relations() for df in ds.iter_batches(name, 500_000)]
    with psycopg.connect(dsn, password=password, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(f"CREATE TABLE {TABLE} (LIKE relation_tuple INCLUDING ALL)")
    lock, done, t0 = threading.Lock(), [0], time.perf_counter()

    def stream(k: int) -> None:
        copy = f"COPY {TABLE} ({COLS}) FROM STDIN (FORMAT csv)"
        with psycopg.connect(dsn, password=password) as c, c.cursor() as cur, cur.copy(copy) as cp:
            for n, block in blocks[k::streams]:
                cp.write(block)
                with lock:
                    done[0] += n
                    say(f"{time.perf_counter() - t0:7.1f} s {done[0]:,} rows")

    try:
        with ThreadPoolExecutor(streams) as pool:
            list(pool.map(stream, range(streams)))
        seconds = time.perf_counter() - t0
        with psycopg.connect(dsn, password=password) as c:
            rows = c.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]
    finally:
        with psycopg.connect(dsn, password=password, autocommit=True) as c:
            c.execute(f"DROP TABLE IF EXISTS {TABLE}")
    return {"rows": rows, "seconds": seconds, "per_s": rows / seconds, "streams": streams}


def _datastore() -> tuple[str, str | None]:
    from authzbench.run.servers import _load_state

    st = _load_state("spicedb-pg")
    if not st or st["mode"] != "native":
        raise UserError("no native spicedb-pg running here: start one with `authzbench up spicedb-pg`")
    return st["endpoint"]["datastore_dsn"], st["endpoint"].get("datastore_password")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m authzbench.systems.spicedb.tools.copy_floor")
    p.add_argument("dataset")
    p.add_argument("--streams", type=int, default=2)
    args = p.parse_args(argv)
    try:
        if args.streams < 1:
            raise UserError(f"--streams {args.streams}: must be 1 or more")
        ds, (dsn, password) = Dataset.open(args.dataset), _datastore()
    except UserError as e:
        print(f"spicedb_copy_floor: error: {e}", file=sys.stderr)
        return 2
    got = copy_floor(ds, dsn, password, args.streams)
    print(f"COPY of {got['rows']:,} relationships into a table LIKE relation_tuple in {got['seconds']:.1f} s "
          f"({got['per_s']:,.0f}/s) over {got['streams']} stream(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
