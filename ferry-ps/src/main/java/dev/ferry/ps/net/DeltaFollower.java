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
 * <p>Cursors: per training server, its log's id and the last tick fully applied. A server whose
 * log id changed (it restarted), a new server, this server's start and any change of the slots
 * it holds (owner or backup) make the next poll start from tick 0: every row that training server
 * stores in those slots. That full resync is what makes a restarted serving server catch up.
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
    private volatile String lastError;
    private volatile boolean closed;

    private record Cursor(long logId, long tick) {
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

    /** Polls that started from tick 0 after a restart or a change of slots. */
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
            }
            lastSlots = slots;
            List<String> now = List.copyOf(sources.get());
            lastSources = now;
            cursors.keySet().retainAll(new HashSet<>(now));
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
        long[] bits = new long[Slots.COUNT / 64];
        for (int slot = 0; slot < Slots.COUNT; slot++) {
            int g = RoutingTable.groupOfSlot(slot);
            boolean held = v.table().slots().serverOfSlot(slot) == v.self()
                    || (v.replicas() != null && v.replicas().isBackup(g, v.self()));
            if (held) {
                bits[slot >>> 6] |= 1L << (slot & 63);
            }
        }
        return bits;
    }

    private void poll(String source, long[] slots) {
        RpcChannel channel = client.channel(source);
        byte[] request = new byte[ExportDescriptor.TABLES_REQUEST];
        request[0] = ExportDescriptor.VERSION;
        long logId;
        long upTo;
        List<TableConfig> tables = new java.util.ArrayList<>();
        try (RpcResponse answer = call(channel, ExportDescriptor.EXPORT_TABLES, request)) {
            MemorySegment in = answer.segment();
            readTables(in, source, tables);
            logId = in.get(PsDescriptor.LONG, 0);
            upTo = in.get(PsDescriptor.LONG, 8);
        }
        Cursor cursor = cursors.get(source);
        long since = cursor != null && cursor.logId() == logId ? cursor.tick() : 0;
        if (since == 0) {
            resyncs.increment();
        }
        for (TableConfig config : tables) {
            SparseTable table = localTable(config, source);
            byte[] name = PsDescriptor.nameBytes(config.name());
            long afterId = 0;
            boolean first = true;
            while (true) {
                byte[] body = new byte[ExportDescriptor.rowsRequestBytes(name.length)];
                ExportDescriptor.writeRowsRequest(MemorySegment.ofArray(body), logId, since, upTo, afterId, first,
                        pageRows, slots, name);
                try (RpcResponse answer = call(channel, ExportDescriptor.EXPORT_ROWS, body)) {
                    MemorySegment page = answer.segment();
                    int status = page.byteSize() >= ExportDescriptor.PAGE_HEADER ? page.get(PsDescriptor.INT, 0) : -1;
                    if (status == ExportDescriptor.LOG_CHANGED) {
                        cursors.remove(source);
                        throw new PsException(PsException.Code.CLOSED, "its export log changed (restarted); "
                                + "resyncing next poll");
                    }
                    MemorySegment rows;
                    try {
                        rows = checkPage(page, RowTransfer.rowBytes(table), first, afterId, slots);
                    } catch (PsException bad) {
                        rejected.increment();
                        throw bad;
                    }
                    int written = RowTransfer.merge(table, rows);
                    int count = (int) (rows.byteSize() / RowTransfer.rowBytes(table));
                    applied.add(written);
                    older.add(count - written);
                    bytes.add(rows.byteSize());
                    if (page.get(PsDescriptor.INT, 24) == 0) {
                        break;
                    }
                    afterId = page.get(PsDescriptor.LONG, 16);
                    first = false;
                }
            }
        }
        cursors.put(source, new Cursor(logId, upTo));
    }

    /**
     * Checks a page of {@code EXPORT_ROWS} before any of it is applied: status, row size, length,
     * ids ascending after {@code afterId}, each in a wanted slot. Returns its rows.
     *
     * @throws PsException {@code INVALID_ARGUMENT} or {@code LENGTH_MISMATCH} naming the problem
     */
    static MemorySegment checkPage(MemorySegment page, long rowBytes, boolean first, long afterId, long[] slots) {
        if (page.byteSize() < ExportDescriptor.PAGE_HEADER) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "a page of " + page.byteSize()
                    + " bytes is shorter than its header (" + ExportDescriptor.PAGE_HEADER + ")");
        }
        int status = page.get(PsDescriptor.INT, 0);
        if (status != ExportDescriptor.OK) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "the page's status is " + status);
        }
        int count = page.get(PsDescriptor.INT, 4);
        long size = page.get(PsDescriptor.LONG, 8);
        if (size != rowBytes) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "the page's rows are of " + size
                    + " bytes; the local table's of " + rowBytes + " (another table layout)");
        }
        if (count < 0 || page.byteSize() != ExportDescriptor.PAGE_HEADER + count * rowBytes) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "a page of " + count + " rows of " + rowBytes
                    + " bytes has " + page.byteSize() + " bytes");
        }
        int more = page.get(PsDescriptor.INT, 24);
        if (more != 0 && more != 1) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "the page's more flag is " + more);
        }
        MemorySegment rows = page.asSlice(ExportDescriptor.PAGE_HEADER);
        long previous = afterId;
        for (int i = 0; i < count; i++) {
            long id = RowTransfer.idOf(rows, i * rowBytes);
            if ((!first || i > 0) && id <= previous) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "row " + i + " (id " + id
                        + ") does not follow id " + previous + ": pages are ascending by id");
            }
            int slot = Slots.slotOf(id);
            if ((slots[slot >>> 6] & (1L << (slot & 63))) == 0) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "row " + i + " (id " + id + ") is in slot "
                        + slot + ", which this server does not hold");
            }
            if (RowTransfer.stepsOf(rows, i * rowBytes) < 0) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "row " + i + " (id " + id
                        + ") has a negative step count");
            }
            previous = id;
        }
        if (more == 1 && count > 0 && page.get(PsDescriptor.LONG, 16) < previous) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "the page's last id "
                    + page.get(PsDescriptor.LONG, 16) + " is before its last row's " + previous);
        }
        return rows;
    }

    private static void readTables(MemorySegment in, String source, List<TableConfig> out) {
        if (in.byteSize() < ExportDescriptor.TABLES_HEADER) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "an EXPORT_TABLES answer of " + in.byteSize()
                    + " bytes");
        }
        int n = in.get(PsDescriptor.INT, 16);
        long at = ExportDescriptor.TABLES_HEADER;
        for (int i = 0; i < n; i++) {
            if (at + 8 > in.byteSize()) {
                throw new PsException(PsException.Code.LENGTH_MISMATCH, "the EXPORT_TABLES answer ends before table "
                        + i + " of " + n);
            }
            int length = in.get(PsDescriptor.INT, at);
            if (length < PsDescriptor.HEADER || at + 8 + length > in.byteSize()) {
                throw new PsException(PsException.Code.LENGTH_MISMATCH, "table " + i + " of " + length
                        + " bytes does not fit the EXPORT_TABLES answer");
            }
            MemorySegment create = in.asSlice(at + 8, length);
            PsDescriptor.checkHeader(create);
            out.add(PsDescriptor.readTable(create));
            at += 8 + ((length + 7) & ~7L);
        }
    }

    /** The local copy of a training table, made on first sight; one of another layout is refused. */
    private SparseTable localTable(TableConfig config, String source) {
        try {
            SparseTable table = ps.table(config.name());
            if (table.dimension() != config.dimension()
                    || table.config().optimizer().stateSlots() != config.optimizer().stateSlots()) {
                throw new PsException(PsException.Code.WRONG_DIMENSION, "table '" + config.name()
                        + "' here has dimension " + table.dimension() + " and " + table.config().optimizer()
                        + "; training server " + source + " has " + config.dimension() + " and " + config.optimizer());
            }
            return table;
        } catch (PsException e) {
            if (e.code() != PsException.Code.UNKNOWN_TABLE) {
                throw e;
            }
        }
        try {
            return ps.createTable(config);
        } catch (PsException e) {
            if (e.code() == PsException.Code.TABLE_EXISTS) {
                return ps.table(config.name());
            }
            throw e;
        }
    }

    private RpcResponse call(RpcChannel channel, RpcMethod method, byte[] body) {
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
