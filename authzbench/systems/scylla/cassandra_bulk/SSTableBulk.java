package authzbench;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.File;
import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.cassandra.db.Clustering;
import org.apache.cassandra.db.DecoratedKey;
import org.apache.cassandra.db.DeletionTime;
import org.apache.cassandra.db.LivenessInfo;
import org.apache.cassandra.db.marshal.ByteBufferAccessor;
import org.apache.cassandra.db.marshal.CompositeType;
import org.apache.cassandra.db.rows.AbstractUnfilteredRowIterator;
import org.apache.cassandra.db.rows.BTreeRow;
import org.apache.cassandra.db.rows.BufferCell;
import org.apache.cassandra.db.rows.EncodingStats;
import org.apache.cassandra.db.rows.Row;
import org.apache.cassandra.db.rows.Rows;
import org.apache.cassandra.db.rows.Unfiltered;
import org.apache.cassandra.io.sstable.CQLSSTableWriter;
import org.apache.cassandra.io.sstable.SSTableTxnWriter;
import org.apache.cassandra.schema.ColumnMetadata;
import org.apache.cassandra.schema.TableMetadata;
import org.apache.cassandra.tools.NodeProbe;
import org.apache.cassandra.utils.btree.BTree;

/**
 * authzbench's bulk path for Cassandra (authzbench/backends/scylla.py; built by
 * authzbench/provision/native/cassandra.py): blocks of rows streamed on stdin become SSTables, then, when
 * asked, the node imports them (the JMX call behind `nodetool import`).
 *
 * Each block becomes one sorted SSTable: its partitions are ordered by token here and handed to the
 * SSTable writer that CQLSSTableWriter's sorted writer opens, one Row built per row straight from the
 * column buffers. Going through CQLSSTableWriter.rawAddRow instead (a CQL bind and validation per row, an unsorted in-heap buffer)
 * cost ~10 CPU-us a row (4M rows: ~41 CPU-s), and its buffer, sized by serialized bytes, held several
 * times that in heap (a 128 MiB buffer filled a 1 GiB heap: minutes of full GCs).
 * Blocks go to one pool of writer threads, a thread a core, whatever their table: with a thread a table,
 * perm_by_user (~1.5-1.9x perm_by_resource's rows) kept its thread busy while the other waited on the
 * pipe, and a large replay used 1.75 of 2 cores. Memory is bounded by the blocks in flight (a thread's
 * each plus QUEUE queued).
 *
 * stdin, big-endian frames, each an int tag then the table's int id:
 *   1 TABLE  utf schema (CREATE TABLE ks.t ...), utf insert (INSERT INTO ks.t (cols) VALUES (?, ...)),
 *            utf column names (comma-separated, the order values come in), utf kinds (a letter a column:
 *            i int, b boolean, t text from the dictionary), int n + n utf dictionary entries
 *   2 ROWS   int n, then per column n values (i: 4-byte ints, b: 1 byte, t: 4-byte dictionary codes);
 *            rows grouped by partition (each partition's rows consecutive)
 *   3 CLOSE  the table is complete: one line "table NAME rows N sstables S bytes B seconds T" on stdout
 *   0 END    (no id) then "done"
 *
 * java ... authzbench.SSTableBulk write OUT_DIR
 * java ... authzbench.SSTableBulk import HOST JMX_PORT KEYSPACE TABLE=DIR ...
 */
public final class SSTableBulk {
    private static final int QUEUE = 2;  // blocks queued ahead of the writer threads
    private static final ByteBuffer[] BOOL = {ByteBuffer.wrap(new byte[]{0}), ByteBuffer.wrap(new byte[]{1})};

    public static void main(String[] args) throws Exception {
        try {
            if (args.length == 2 && args[0].equals("write")) {
                write(new File(args[1]));
            } else if (args.length >= 5 && args[0].equals("import")) {
                importTables(args[1], Integer.parseInt(args[2]), args[3], List.of(args).subList(4, args.length));
            } else {
                System.err.println("usage: SSTableBulk write OUT_DIR | import HOST JMX_PORT KEYSPACE TABLE=DIR ...");
                System.exit(2);
            }
        } catch (Throwable t) {
            t.printStackTrace();
            System.err.println("error: " + t);  // last: the caller quotes the log's last line
            System.exit(1);
        }
        System.exit(0);  // the writer's static executors are not daemon threads
    }

    /** A block of rows: one array a column (ints, booleans as 0/1, or dictionary codes). */
    record Block(int n, int[][] cols) {}

    /** The writer threads: each block becomes an SSTable on whichever is free; at most QUEUE wait. */
    static final class Pool {
        final ExecutorService threads;
        final Semaphore room;
        volatile Throwable error;

        Pool(int n) {
            threads = Executors.newFixedThreadPool(n, r -> {
                Thread t = new Thread(r, "sstable-writer");
                t.setDaemon(true);
                return t;
            });
            room = new Semaphore(n + QUEUE);
        }

        void submit(Table t, Block b) throws InterruptedException {
            while (!room.tryAcquire(1, TimeUnit.SECONDS))
                check();
            check();
            t.pending.add(threads.submit(() -> {
                try {
                    t.writeSSTable(b);
                } catch (Throwable e) {
                    error = new IllegalStateException("table " + t.name + ": " + e, e);
                } finally {
                    room.release();
                }
            }));
        }

        /** Waits for every block of the table; the first failure of any table is thrown. */
        void drain(Table t) throws Exception {
            for (Future<?> f : t.pending)
                f.get();
            check();
        }

        void check() {
            if (error != null)
                throw new IllegalStateException(error.getMessage(), error);
        }
    }

    /** One table: its blocks written as sorted SSTables by the pool. */
    static final class Table {
        final String schema, insert, name, kinds;
        final File dir;
        final ByteBuffer[] dict;
        final List<Future<?>> pending = new ArrayList<>();
        final long timestamp = System.currentTimeMillis() * 1000;
        final long nowInSec = System.currentTimeMillis() / 1000;
        final LivenessInfo live = LivenessInfo.create(timestamp, nowInSec);
        int[] pk, ck;  // value positions of the partition key and clustering columns, in key order
        int[] regular;
        ColumnMetadata[] regularCols;
        volatile TableMetadata metadata;
        final AtomicLong rows = new AtomicLong(), sstables = new AtomicLong();
        final long started = System.nanoTime();

        Table(File root, String schema, String insert, String columns, String kinds, String[] dict) {
            this.schema = schema;
            this.insert = insert;
            this.kinds = kinds;
            this.dict = new ByteBuffer[dict.length];
            for (int i = 0; i < dict.length; i++) {
                this.dict[i] = ByteBuffer.wrap(dict[i].getBytes(StandardCharsets.UTF_8));
                if (i > 0 && this.dict[i - 1].compareTo(this.dict[i]) >= 0)  // codes must sort as the text does
                    throw new IllegalArgumentException("dictionary not in ascending byte order: " + dict[i]);
            }
            String qualified = insert.replaceFirst("(?is)^\\s*INSERT\\s+INTO\\s+", "").split("[\\s(]", 2)[0];
            this.name = qualified.substring(qualified.indexOf('.') + 1);
            this.dir = new File(root, qualified.replace('.', File.separatorChar));
            if (!dir.isDirectory() && !dir.mkdirs())
                throw new IllegalStateException("cannot create " + dir);
            this.columnNames = columns.split(",");
        }

        final String[] columnNames;

        /** Positions of the key and regular columns among the values, from the table's metadata. */
        synchronized void resolve(TableMetadata m) {
            if (metadata != null)
                return;
            List<String> names = Arrays.asList(columnNames);
            pk = m.partitionKeyColumns().stream().mapToInt(c -> names.indexOf(c.name.toString())).toArray();
            ck = m.clusteringColumns().stream().mapToInt(c -> names.indexOf(c.name.toString())).toArray();
            regularCols = m.regularColumns().stream().toArray(ColumnMetadata[]::new);
            regular = Arrays.stream(regularCols).mapToInt(c -> names.indexOf(c.name.toString())).toArray();
            for (int[] pos : new int[][]{pk, ck, regular})
                for (int p : pos)
                    if (p < 0)
                        throw new IllegalArgumentException(name + ": a key or regular column has no values");
            metadata = m;
        }

        ByteBuffer value(Block b, int col, int row) {
            int v = b.cols[col][row];
            switch (kinds.charAt(col)) {
                case 't': return dict[v].duplicate();
                case 'b': return BOOL[v].duplicate();
                default: return ByteBuffer.allocate(4).putInt(0, v);
            }
        }

        void writeSSTable(Block b) throws Exception {
            CQLSSTableWriter cw = CQLSSTableWriter.builder().inDirectory(dir.getPath()).forTable(schema).using(insert)
                                                  .sorted().build();
            Object writer = field(cw, "writer");
            if (metadata == null)
                resolve(((org.apache.cassandra.schema.TableMetadataRef) field(writer, "metadata")).get());
            // partitions: runs of equal partition-key values, then ordered by token
            int[] starts = new int[b.n + 1];
            int parts = 0;
            for (int r = 0; r < b.n; r++)
                if (r == 0 || !sameKey(b, r - 1, r))
                    starts[parts++] = r;
            starts[parts] = b.n;
            DecoratedKey[] keys = new DecoratedKey[parts];
            Integer[] order = new Integer[parts];
            for (int p = 0; p < parts; p++) {
                keys[p] = metadata.partitioner.decorateKey(partitionKey(b, starts[p]));
                order[p] = p;
            }
            Arrays.sort(order, (x, y) -> keys[x].compareTo(keys[y]));
            // Each partition goes to the SSTable's own writer as an iterator over rows built here. Through
            // the sorted writer's PartitionUpdate (a BTree of the partition's rows, merged back into an
            // iterator, its stats collected: 2/3 of the samples in a profile) the large profile's 100.6M
            // permission rows cost 74.1 CPU-s; this way, with the shared pool, 49.1 (paired runs).
            SSTableTxnWriter txn = (SSTableTxnWriter) method(writer.getClass(), "getOrCreateWriter").invoke(writer);
            for (int p : order)
                txn.append(new Partition(this, b, keys[p], starts[p], starts[p + 1]));
            cw.close();
            rows.addAndGet(b.n);
            sstables.incrementAndGet();
        }

        /** Row r of a block, as the row that CQL would write for it. */
        Row row(Block b, int r) {
            ByteBuffer[] clustering = new ByteBuffer[ck.length];
            for (int c = 0; c < ck.length; c++)
                clustering[c] = value(b, ck[c], r);
            Clustering<?> key = Clustering.make(clustering);
            // The tables' own shapes (no regular column, or one) built directly: one BTree.build of the cells
            // for every shape cost 12% more CPU on the large replay (paired, 3 runs).
            if (regular.length == 0)
                return BTreeRow.noCellLiveRow(key, live);
            if (regular.length == 1)
                return BTreeRow.create(key, live, Row.Deletion.LIVE,
                                       BTree.singleton(BufferCell.live(regularCols[0], timestamp, value(b, regular[0], r))));
            Row.Builder rb = BTreeRow.sortedBuilder();
            rb.newRow(key);
            rb.addPrimaryKeyLivenessInfo(live);
            for (int c = 0; c < regular.length; c++)
                rb.addCell(BufferCell.live(regularCols[c], timestamp, value(b, regular[c], r)));
            return rb.build();
        }

        /** Whether row r's clustering sorts after row r - 1's (the order the SSTable must hold). Ints compare
         *  as Int32Type does, booleans false first, text by dictionary code (the dictionary is sorted). */
        boolean ascending(Block b, int r) {
            for (int c : ck) {
                int x = b.cols[c][r - 1], y = b.cols[c][r];
                if (x != y)
                    return x < y;
            }
            return false;
        }

        boolean sameKey(Block b, int r1, int r2) {
            for (int c : pk)
                if (b.cols[c][r1] != b.cols[c][r2])
                    return false;
            return true;
        }

        ByteBuffer partitionKey(Block b, int r) {
            if (pk.length == 1)
                return value(b, pk[0], r);
            ByteBuffer[] parts = new ByteBuffer[pk.length];
            for (int c = 0; c < pk.length; c++)
                parts[c] = value(b, pk[c], r);
            return CompositeType.build(ByteBufferAccessor.instance, parts);
        }

        long bytes() {
            long total = 0;
            File[] files = dir.listFiles();
            if (files != null)
                for (File f : files)
                    total += f.length();
            return total;
        }
    }

    /** One partition's rows [from, to) of a block, built as the writer asks for them; a row out of
     *  clustering order stops the load (the SSTable would be unreadable). */
    static final class Partition extends AbstractUnfilteredRowIterator {
        final Table t;
        final Block b;
        final int from, to;
        int next;

        Partition(Table t, Block b, DecoratedKey key, int from, int to) {
            super(t.metadata, key, DeletionTime.LIVE, t.metadata.regularAndStaticColumns(), Rows.EMPTY_STATIC_ROW,
                  false, EncodingStats.NO_STATS);
            this.t = t;
            this.b = b;
            this.from = from;
            this.to = to;
            this.next = from;
        }

        @Override
        protected Unfiltered computeNext() {
            if (next == to)
                return endOfData();
            if (next > from && !t.ascending(b, next))
                throw new IllegalStateException(t.name + ": rows of a partition out of clustering order at row " + next);
            return t.row(b, next++);
        }
    }

    static Object field(Object o, String name) throws ReflectiveOperationException {
        for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(o);
            } catch (NoSuchFieldException e) {
                // declared higher up
            }
        }
        throw new NoSuchFieldException(name);
    }

    static Method method(Class<?> cls, String name, Class<?>... types) throws NoSuchMethodException {
        for (Class<?> c = cls; c != null; c = c.getSuperclass()) {
            try {
                Method m = c.getDeclaredMethod(name, types);
                m.setAccessible(true);
                return m;
            } catch (NoSuchMethodException e) {
                // declared higher up
            }
        }
        throw new NoSuchMethodException(name);
    }

    static void write(File root) throws Exception {
        DataInputStream in = new DataInputStream(new BufferedInputStream(System.in, 1 << 20));
        Map<Integer, Table> tables = new HashMap<>();
        Pool pool = new Pool(Math.max(2, Runtime.getRuntime().availableProcessors()));
        while (true) {
            int tag;
            try {
                tag = in.readInt();
            } catch (EOFException e) {
                throw new IllegalStateException("input ended without END");
            }
            if (tag == 0)
                break;
            int id = in.readInt();
            if (tag == 1) {
                String schema = in.readUTF(), insert = in.readUTF(), columns = in.readUTF(), kinds = in.readUTF();
                String[] dict = new String[in.readInt()];
                for (int i = 0; i < dict.length; i++)
                    dict[i] = in.readUTF();
                tables.put(id, new Table(root, schema, insert, columns, kinds, dict));
            } else if (tag == 2) {
                Table t = tables.get(id);
                pool.submit(t, readBlock(in, t.kinds));
            } else if (tag == 3) {
                Table t = tables.get(id);
                pool.drain(t);
                System.out.printf("table %s rows %d sstables %d bytes %d seconds %.3f%n", t.name, t.rows.get(), t.sstables.get(),
                                  t.bytes(), (System.nanoTime() - t.started) / 1e9);
                System.out.flush();
            } else {
                throw new IllegalStateException("unknown frame tag " + tag);
            }
        }
        System.out.println("done");
    }

    static Block readBlock(DataInputStream in, String kinds) throws IOException {
        int n = in.readInt();
        int[][] cols = new int[kinds.length()][];
        for (int c = 0; c < cols.length; c++) {
            boolean bool = kinds.charAt(c) == 'b';
            byte[] raw = new byte[n * (bool ? 1 : 4)];
            in.readFully(raw);
            int[] col = cols[c] = new int[n];
            if (bool) {
                for (int r = 0; r < n; r++)
                    col[r] = raw[r] != 0 ? 1 : 0;
            } else {
                ByteBuffer.wrap(raw).asIntBuffer().get(col);
            }
        }
        return new Block(n, cols);
    }

    /** `nodetool import` of each TABLE=DIR: files moved into the table (not copied), levels and repaired
     * state reset, tokens verified (the node must own every key), no SSTable or extended verification. */
    static void importTables(String host, int port, String ks, List<String> specs) throws Exception {
        try (NodeProbe probe = new NodeProbe(host, port)) {
            for (String spec : specs) {
                String[] kv = spec.split("=", 2);
                long t0 = System.nanoTime();
                List<String> failed = probe.importNewSSTables(ks, kv[0], Set.of(kv[1]), true, true, false, true,
                                                              true, false, false, false, true);
                if (!failed.isEmpty()) {
                    System.out.println("failed " + kv[0] + " " + String.join(",", failed));
                    System.exit(1);
                }
                System.out.printf("imported %s seconds %.3f%n", kv[0], (System.nanoTime() - t0) / 1e9);
                System.out.flush();
            }
            compactNow(probe, ks, specs.stream().map(spec -> spec.split("=", 2)[0]).toArray(String[]::new));
        }
        System.out.println("done");
    }

    /** The compactions the imported SSTables call for, started now and waited for: left to the node's
     *  5-minute background check, they ran ~300 s after the load, at ~1 core for ~20 s, in the middle of the
     *  next backend's measured phases (make bench 20261126-151243 and -183219: Elasticsearch's). */
    static void compactNow(NodeProbe probe, String ks, String[] tables) throws Exception {
        long t0 = System.nanoTime();
        probe.enableAutoCompaction(ks, tables);  // submits the tables' background compactions at once
        Thread.sleep(500);
        while (((Number) probe.getCompactionMetric("PendingTasks")).intValue() > 0
               || !probe.getCompactionManagerProxy().getCompactions().isEmpty()) {
            Thread.sleep(500);
        }
        System.out.printf("compacted seconds %.3f%n", (System.nanoTime() - t0) / 1e9);
        System.out.flush();
    }
}
