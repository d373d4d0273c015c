package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Supplier;
import java.util.logging.Level;
import java.util.logging.Logger;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.DenseTensor;
import dev.ferry.ps.DenseTransfer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.RowTransfer;
import dev.ferry.ps.Slots;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableConfig;
import dev.ferry.rpc.RemoteException;
import dev.ferry.rpc.RequestWriter;
import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcClient;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.rpc.RpcMethod;
import dev.ferry.rpc.RpcResponse;
import dev.ferry.transport.TransportConfig;

/**
 * The serving side of the live export: every interval, asks each training server
 * ({@link ExportService}) for the rows of this server's slots changed since its cursor there, and
 * merges them into the local read-only tables ({@link RowTransfer#merge}: per id the row with more
 * steps wins, so a page applied twice, late or out of order changes nothing). Each row is
 * replaced whole under its shard's lock, so a pull sees it before or after a delta, never torn.
 *
 * <p>Cursors: per training server, its log's id, the last tick fully applied and the hash of the
 * slots it exports. A server whose log id or exported slots changed (a restart, a failover, a
 * move), a new server, this server's start and any change of the slots it holds (owner or
 * backup) make the next poll catch up first: from that server's latest checkpoint stamped by its
 * current log, then the changes after the checkpoint's tick ({@link CheckpointCatchUp}); without
 * a usable checkpoint, from tick 0 (every row that training server stores in those slots).
 * After a catch-up and the poll after it, the local rows of that server's slots that neither
 * delivered are deleted ({@link ResyncSweep}): deletions a catch-up cannot be told about.
 *
 * <p>Threads: one poller thread owns the cursors and every call; the counters are read from any
 * thread. A training server that cannot be reached keeps its cursor and is asked again next time;
 * meanwhile this server serves the values it has and {@link #lagMillis} grows.
 */
public final class DeltaFollower implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(DeltaFollower.class.getName());
    private static final long MAX_CALL_MILLIS = 10_000;

    private final PsServer server;
    private final ParameterServer ps;
    private final Supplier<List<String>> sources;
    private final long intervalMillis;
    private final int pageRows;
    /** A call's deadline: two intervals, within [2 s, 10 s]. */
    private final long callMillis;
    private final RpcClient client;
    private final ScheduledExecutorService poller;
    private final long startNanos = System.nanoTime();
    /** Poller thread only. */
    private final Map<String, Cursor> cursors = new HashMap<>();
    /** Poller thread only: per source, the sweep of its last catch-up, until the poll after it. */
    private final Map<String, ResyncSweep> sweeps = new HashMap<>();
    private long[] lastSlots;
    /** Per source failing now, the reason last logged. */
    private final Map<String, String> failing = new HashMap<>();
    private Thread owner;
    /** Per source, when the poll that completed last started (read by other threads). */
    private final Map<String, Long> syncedAt = new java.util.concurrent.ConcurrentHashMap<>();
    private volatile List<String> lastSources = List.of();
    private final LongAdder rounds = new LongAdder();
    private final LongAdder applied = new LongAdder();
    private final LongAdder older = new LongAdder();
    private final LongAdder bytes = new LongAdder();
    private final LongAdder resyncs = new LongAdder();
    private final LongAdder failures = new LongAdder();
    private final LongAdder rejected = new LongAdder();
    private final LongAdder deleted = new LongAdder();
    private final LongAdder denseApplied = new LongAdder();
    private final LongAdder swept = new LongAdder();
    private final CheckpointCatchUp catchUp;
    private volatile String lastError;
    private volatile boolean closed;

    /** Per training server: its log, the last tick applied and the hash of the slots it exports. */
    private record Cursor(long logId, long tick, int primaries) {
    }

    private DeltaFollower(PsServer server, Supplier<List<String>> sources, RpcConfig rpc, TransportConfig transport,
            long intervalMillis, int pageRows) {
        this.server = Objects.requireNonNull(server, "server");
        this.ps = server.parameterServer();
        this.sources = Objects.requireNonNull(sources, "sources");
        if (intervalMillis < 1 || pageRows < 1 || pageRows > ExportService.MAX_PAGE_ROWS) {
            throw new IllegalArgumentException("interval " + intervalMillis + " ms and " + pageRows
                    + " rows a page: need >= 1 ms and [1, " + ExportService.MAX_PAGE_ROWS + "] rows");
        }
        this.intervalMillis = intervalMillis;
        this.pageRows = pageRows;
        this.callMillis = Math.min(MAX_CALL_MILLIS, Math.max(2_000, 2 * intervalMillis));
        this.client = RpcClient.open(rpc, transport);
        this.catchUp = new CheckpointCatchUp(this, ps);
        this.poller = Executors.newSingleThreadScheduledExecutor(Thread.ofPlatform().daemon()
                .name("ferry-export-follower").factory());
    }

    /**
     * Starts following: {@code server} (a member of the serving cluster, on a
     * {@link ParameterServer#follower} or serving {@link ParameterServer}) gets the rows of its
     * slots from the training servers {@code sources} lists (asked again each poll), every
     * {@code intervalMillis}, over {@code transport}.
     */
    public static DeltaFollower start(PsServer server, Supplier<List<String>> sources, RpcConfig rpc,
            TransportConfig transport, long intervalMillis) {
        DeltaFollower f = new DeltaFollower(server, sources, rpc, transport, intervalMillis, 4_096);
        f.poller.scheduleWithFixedDelay(f::round, 0, intervalMillis, TimeUnit.MILLISECONDS);
        return f;
    }

    /** Poll rounds done (each over every source). */
    public long rounds() {
        return rounds.sum();
    }

    /** Rows merged. */
    public long rowsApplied() {
        return applied.sum();
    }

    /** Rows received that were not newer than the local copy (repeats, late pages). */
    public long rowsOlder() {
        return older.sum();
    }

    /** Bytes of rows received. */
    public long bytesReceived() {
        return bytes.sum();
    }

    /** Rows deleted by tombstones (rows evicted on training). */
    public long rowsDeleted() {
        return deleted.sum();
    }

    /**
     * Rows swept after a catch-up: local rows of a training server's slots that it no longer had
     * (deleted while this server was out of touch longer than deletions are remembered; {@link ResyncSweep}).
     */
    public long rowsSwept() {
        return swept.sum();
    }

    /** Dense tensors merged (whole). */
    public long denseApplied() {
        return denseApplied.sum();
    }

    /** Catch-ups that loaded a training server's checkpoint instead of a full resync. */
    public long checkpointLoads() {
        return catchUp.loads();
    }

    /** Rows merged from checkpoints. */
    public long checkpointRows() {
        return catchUp.rows();
    }

    /** Catch-ups that could not use a checkpoint (none, another log, slots not covered, unreadable). */
    public long checkpointFallbacks() {
        return catchUp.fallbacks();
    }

    /** Why the last catch-up did not use a checkpoint, or null. */
    public String lastFallback() {
        return catchUp.lastFallback();
    }

    /** Polls that started from tick 0 (a full resync: no usable checkpoint) after a restart or a change of slots. */
    public long resyncs() {
        return resyncs.sum();
    }

    /** Polls that failed (a source unreachable, a page refused). */
    public long failures() {
        return failures.sum();
    }

    /** Pages refused as malformed. */
    public long rejectedPages() {
        return rejected.sum();
    }

    /** The reason of the last failed poll, or null. */
    public String lastError() {
        return lastError;
    }

    /**
     * How far behind training this server may be, in milliseconds: the age of the oldest of the
     * sources' last complete polls (since the start for a source never polled completely).
     */
    public long lagMillis() {
        long now = System.nanoTime();
        long worst = 0;
        for (String s : lastSources) {
            long at = syncedAt.getOrDefault(s, startNanos);
            worst = Math.max(worst, now - at);
        }
        return TimeUnit.NANOSECONDS.toMillis(worst);
    }

    /** The export interval. */
    public long intervalMillis() {
        return intervalMillis;
    }

    @Override
    public void close() {
        closed = true;
        poller.shutdownNow();
        try {
            poller.awaitTermination(callMillis + 1_000, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        client.close();
    }

    // ------------------------------------------------------------------------------------------

    private void round() {
        if (owner == null) {
            owner = Thread.currentThread();
        }
        assert owner == Thread.currentThread() : "the follower's state belongs to its poller thread";
        try {
            long[] slots = wantedSlots();
            if (slots == null) {
                return; // no routing table yet
            }
            if (lastSlots != null && !Arrays.equals(slots, lastSlots)) {
                cursors.clear(); // new slots: their rows from the start
                sweeps.clear();
            }
            lastSlots = slots;
            List<String> now = List.copyOf(sources.get());
            lastSources = now;
            cursors.keySet().retainAll(new HashSet<>(now));
            sweeps.keySet().retainAll(new HashSet<>(now));
            syncedAt.keySet().retainAll(new HashSet<>(now));
            failing.keySet().retainAll(new HashSet<>(now));
            for (String source : now) {
                long started = System.nanoTime();
                try {
                    poll(source, slots);
                    syncedAt.put(source, started);
                    if (failing.remove(source) != null) {
                        LOG.info(() -> "export: caught up with training server " + source + " again");
                    }
                } catch (RuntimeException e) {
                    if (closed) {
                        return; // interrupted by close
                    }
                    failures.increment();
                    lastError = "training server " + source + ": " + e.getMessage();
                    // Once per source and reason, not every interval.
                    if (!lastError.equals(failing.put(source, lastError))) {
                        LOG.log(Level.WARNING, "export: " + lastError + " (serving the values it has; asking again"
                                + " every " + intervalMillis + " ms)");
                    }
                }
            }
            rounds.increment();
        } catch (RuntimeException e) {
            failures.increment();
            lastError = e.toString();
            LOG.log(Level.WARNING, "an export poll failed", e);
        }
    }

    /** The slots this server holds (primary or backup) as a bitmap, or null without a table. */
    private long[] wantedSlots() {
        PsServer.View v = server.view();
        if (v.table() == null || v.self() < 0) {
            return null;
        }
        return ExportService.heldSlots(v);
    }

    private void poll(String source, long[] slots) {
        RpcChannel channel = client.channel(source);
        byte[] request = new byte[ExportDescriptor.TABLES_REQUEST];
        request[0] = ExportDescriptor.VERSION;
        long logId;
        long upTo;
        int primaries;
        List<TableConfig> tables = new java.util.ArrayList<>();
        try (RpcResponse answer = call(channel, ExportDescriptor.EXPORT_TABLES, request)) {
            MemorySegment in = answer.segment();
            LocalCopies.readTables(in, tables);
            logId = in.get(PsDescriptor.LONG, 0);
            upTo = in.get(PsDescriptor.LONG, 8);
            primaries = in.get(PsDescriptor.INT, 20);
        }
        Cursor cursor = cursors.get(source);
        ResyncSweep sweep = sweeps.remove(source);
        long since;
        // Another log (a restart) or other primary slots (a failover, a move): its rows of the
        // slots it exports now from its checkpoint, or from the start.
        if (cursor != null && cursor.logId() == logId && cursor.primaries() == primaries) {
            since = cursor.tick();
            if (sweep != null && !sweep.matches(logId, primaries)) {
                sweep = null;
            }
        } else {
            sweep = new ResyncSweep(logId, primaries);
            since = catchUp.fromCheckpoint(channel, source, logId, slots, sweep);
            if (since == 0) {
                resyncs.increment();
            }
        }
        if (since < upTo) {
            for (TableConfig config : tables) {
                pages(channel, source, LocalCopies.table(ps, config, source), logId, since, upTo, slots, sweep);
            }
            dense(channel, source, logId, since, upTo, slots);
        } else if (sweep != null) {
            for (TableConfig config : tables) {
                sweep.table(config.name());
            }
        }
        cursors.put(source, new Cursor(logId, Math.max(since, upTo), primaries));
        if (sweep != null) {
            if (sweep.polled()) {
                long n = sweep.run(ps, slots);
                swept.add(n);
                if (n > 0) {
                    LOG.info(() -> "export: swept " + n + " rows that training server " + source
                            + " no longer has (deleted while this server was out of touch)");
                }
            } else {
                sweeps.put(source, sweep);
            }
        }
    }

    /** Pages through one table's rows and tombstones stamped in {@code (since, upTo]}. */
    private void pages(RpcChannel channel, String source, SparseTable table, long logId, long since, long upTo,
            long[] slots, ResyncSweep sweep) {
        byte[] name = PsDescriptor.nameBytes(table.name());
        long rowBytes = RowTransfer.rowBytes(table);
        long afterId = 0;
        boolean first = true;
        if (sweep != null) {
            sweep.table(table.name());
        }
        while (true) {
            byte[] body = new byte[ExportDescriptor.rowsRequestBytes(name.length)];
            ExportDescriptor.writeRowsRequest(MemorySegment.ofArray(body), logId, since, upTo, afterId, first, true,
                    pageRows, slots, name);
            try (RpcResponse answer = call(channel, ExportDescriptor.EXPORT_ROWS, body)) {
                MemorySegment page = answer.segment();
                checkStatus(page, source);
                ExportPage checked;
                try {
                    checked = ExportPage.check(page, rowBytes, first, afterId, slots);
                } catch (PsException bad) {
                    rejected.increment();
                    throw bad;
                }
                // Deletions first: a row made again after its deletion replaces the copy of its older life.
                for (int i = 0; i < checked.tombstoneCount(); i++) {
                    if (RowTransfer.delete(table, checked.tombstoneId(i), checked.tombstoneFloor(i))) {
                        deleted.increment();
                    }
                }
                int written = RowTransfer.merge(table, checked.rows());
                if (sweep != null) {
                    sweep.rows(table.name(), checked.rows(), rowBytes);
                }
                int count = (int) (checked.rows().byteSize() / rowBytes);
                applied.add(written);
                older.add(count - written);
                bytes.add(checked.rows().byteSize());
                if (page.get(PsDescriptor.INT, 24) == 0) {
                    return;
                }
                afterId = page.get(PsDescriptor.LONG, 16);
                first = false;
            }
        }
    }

    /** The dense tensors of the wanted slots changed after {@code since}, one call each. */
    private void dense(RpcChannel channel, String source, long logId, long since, long upTo, long[] slots) {
        byte[] after = new byte[0];
        while (true) {
            byte[] body = new byte[ExportDescriptor.denseRequestBytes(after.length)];
            ExportDescriptor.writeDenseRequest(MemorySegment.ofArray(body), logId, since, upTo, slots, after);
            try (RpcResponse answer = call(channel, ExportDescriptor.EXPORT_DENSE, body)) {
                MemorySegment in = answer.segment();
                checkStatus(in, source);
                if (in.byteSize() < ExportDescriptor.DENSE_ANSWER_HEADER || in.get(PsDescriptor.INT, 0) != 0) {
                    rejected.increment();
                    throw new PsException(PsException.Code.LENGTH_MISMATCH, "an EXPORT_DENSE answer of "
                            + in.byteSize() + " bytes");
                }
                if (in.get(PsDescriptor.INT, 4) == 0) {
                    return;
                }
                DenseMove.Received tensor;
                try {
                    tensor = DenseMove.read(in.asSlice(ExportDescriptor.DENSE_ANSWER_HEADER));
                    int slot = Slots.slotOf(PsDescriptor.denseKey(tensor.config().name()));
                    if ((slots[slot >>> 6] & (1L << (slot & 63))) == 0) {
                        throw new PsException(PsException.Code.INVALID_ARGUMENT, "dense tensor '"
                                + tensor.config().name() + "' is in slot " + slot + ", which this server does not hold");
                    }
                    if (after.length > 0 && tensor.config().name().compareTo(
                            new String(after, java.nio.charset.StandardCharsets.UTF_8)) <= 0) {
                        throw new PsException(PsException.Code.INVALID_ARGUMENT, "dense tensor '"
                                + tensor.config().name() + "' does not follow the last one");
                    }
                } catch (PsException bad) {
                    rejected.increment();
                    throw bad;
                }
                if (DenseTransfer.merge(LocalCopies.dense(ps, tensor.config(), source), tensor.row(), false)) {
                    denseApplied.increment();
                }
                after = PsDescriptor.nameBytes(tensor.config().name());
            }
        }
    }

    /** Return codes a page or dense answer may carry instead of rows. */
    private void checkStatus(MemorySegment page, String source) {
        int status = page.byteSize() >= 4 ? page.get(PsDescriptor.INT, 0) : -1;
        if (status == ExportDescriptor.LOG_CHANGED) {
            cursors.remove(source);
            throw new PsException(PsException.Code.CLOSED, "its export log changed (restarted); resyncing next poll");
        }
        if (status == ExportDescriptor.FORGOTTEN) {
            cursors.remove(source);
            throw new PsException(PsException.Code.CLOSED, "it forgot deletions after this server's cursor (out of"
                    + " touch longer than its retention); resyncing next poll: rows deleted meanwhile may stay");
        }
    }

    /**
     * Checks a page of {@code EXPORT_ROWS} before any of it is applied ({@link ExportPage#check});
     * returns its rows.
     *
     * @throws PsException {@code INVALID_ARGUMENT} or {@code LENGTH_MISMATCH} naming the problem
     */
    static MemorySegment checkPage(MemorySegment page, long rowBytes, boolean first, long afterId, long[] slots) {
        return ExportPage.check(page, rowBytes, first, afterId, slots).rows();
    }

    RpcResponse call(RpcChannel channel, RpcMethod method, byte[] body) {
        RequestWriter writer = segment -> MemorySegment.copy(MemorySegment.ofArray(body), 0, segment, 0, body.length);
        try {
            return channel.call(method, body.length, writer, callMillis).get(callMillis + 1_000,
                    TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof RemoteException remote) {
                PsException ps = PsDescriptor.toPsException(remote, channel.address());
                if (ps != null) {
                    throw ps;
                }
            }
            throw cause instanceof RuntimeException r ? r : new IllegalStateException(String.valueOf(cause), cause);
        } catch (TimeoutException e) {
            throw new IllegalStateException("no answer from " + channel.address() + " in time", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }
}
