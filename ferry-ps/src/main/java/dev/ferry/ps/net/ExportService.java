package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Optional;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

import dev.ferry.ps.DenseTensor;
import dev.ferry.ps.ExportCheckpoints;
import dev.ferry.ps.ExportLog;
import dev.ferry.ps.ExportStamp;
import dev.ferry.ps.Slots;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.RowTransfer;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableStats;
import dev.ferry.rpc.ServerCall;

/**
 * The training side of the live export: answers followers ({@link DeltaFollower}) with the rows
 * changed since their cursor, from the server's {@link ExportLog}. Pull-based: the training
 * server keeps no state per follower, so followers come, go and restart without telling it.
 *
 * <p>Registered on a {@link PsServer}'s RPC server by {@link #attach}; handlers run on the
 * server's handler threads. The rows are copied whole (each under its shard lock) straight into
 * the reply buffer.
 */
public final class ExportService {

    /** Rows per page at most, whatever a follower asks: bounds the reply buffer. */
    public static final int MAX_PAGE_ROWS = 16_384;
    /** Bytes per page at most. */
    public static final long MAX_PAGE_BYTES = 2L << 20;

    private final ParameterServer ps;
    private final PsServer server;
    private final ExportLog log;
    private final LongAdder polls = new LongAdder();
    private final LongAdder rows = new LongAdder();
    private final LongAdder bytes = new LongAdder();
    private final LongAdder refused = new LongAdder();
    private final LongAdder tombstones = new LongAdder();
    private final LongAdder dense = new LongAdder();
    /** The primary slots of the view last asked about (any thread; replaced whole). */
    private volatile Primaries primaries;

    private record Primaries(PsServer.View view, long[] slots, int hash) {
    }

    private ExportService(PsServer server, ExportLog log) {
        this.server = server;
        this.ps = server.parameterServer();
        this.log = log;
    }

    /**
     * Serves the export of {@code server}'s tables and tensors on its RPC server; recording
     * starts with the first poll or checkpoint, and each checkpoint is stamped with the tick it
     * sealed ({@link ParameterServer#exportStamp}). Deletions are remembered an hour.
     */
    public static ExportService attach(PsServer server) {
        return attach(server, new ExportLog(server.parameterServer()));
    }

    /** {@link #attach(PsServer)} with a log of one's own (a retention, a clock: tests). */
    public static ExportService attach(PsServer server, ExportLog log) {
        ExportService service = new ExportService(server, log);
        server.rpcServer().register(ExportDescriptor.EXPORT_TABLES, call -> service.guard(() -> service.tables(call)))
                .register(ExportDescriptor.EXPORT_ROWS, call -> service.guard(() -> service.rows(call)))
                .register(ExportDescriptor.EXPORT_DENSE, call -> service.guard(() -> service.dense(call)))
                .register(ExportDescriptor.EXPORT_CHECKPOINT, call -> service.guard(() -> service.checkpoint(call)));
        server.parameterServer().exportStamp(() -> {
            long[] held = heldSlots(server.view());
            long tick = log.seal();
            return new ExportStamp(log.id(), tick, held);
        });
        return service;
    }

    /**
     * The slots a member holds in view {@code v} (primary or backup) as a bitmap; every slot when
     * it has no routing table (a server on its own), none when it is not in the table.
     */
    static long[] heldSlots(PsServer.View v) {
        if (v.table() == null) {
            long[] every = new long[Slots.COUNT / 64];
            Arrays.fill(every, -1L);
            return every;
        }
        long[] bits = v.table().slots().owned(v.self()).toWords(); // none when it is not in the table
        if (v.self() >= 0 && v.replicas() != null) {
            for (int slot = 0; slot < Slots.COUNT; slot++) {
                if (v.replicas().isBackup(RoutingTable.groupOfSlot(slot), v.self())) {
                    bits[slot >>> 6] |= 1L << (slot & 63);
                }
            }
        }
        return bits;
    }

    /**
     * The slots this server is the primary of now (every slot without a routing table), and their
     * hash: only those are exported, so that with replicas each row travels once, from its
     * primary; a follower that sees the hash change asks again from its catch-up.
     */
    private Primaries primaries() {
        PsServer.View v = server.view();
        Primaries p = primaries;
        if (p != null && p.view() == v) {
            return p;
        }
        long[] bits;
        if (v.table() == null) {
            bits = new long[Slots.COUNT / 64];
            Arrays.fill(bits, -1L);
        } else {
            bits = v.table().slots().owned(v.self()).toWords(); // none when it is not in the table
        }
        long mixed = 0;
        for (long word : bits) {
            mixed = Slots.mix(mixed ^ word); // not Arrays.hashCode: it folds -1L and 0L alike
        }
        int hash = (int) (mixed ^ (mixed >>> 32));
        p = new Primaries(v, bits, hash == 0 ? 1 : hash);
        primaries = p;
        return p;
    }

    private static boolean has(long[] bits, int slot) {
        return (bits[slot >>> 6] & (1L << (slot & 63))) != 0;
    }

    /** Tombstones sent to followers. */
    public long tombstonesExported() {
        return tombstones.sum();
    }

    /** Dense tensors sent to followers (whole). */
    public long denseExported() {
        return dense.sum();
    }

    /** The log of changes (for tests and meters). */
    public ExportLog log() {
        return log;
    }

    /** Polls answered ({@code EXPORT_TABLES}). */
    public long polls() {
        return polls.sum();
    }

    /** Rows sent to followers. */
    public long rowsExported() {
        return rows.sum();
    }

    /** Bytes of rows sent to followers. */
    public long bytesExported() {
        return bytes.sum();
    }

    /** Requests refused as malformed. */
    public long refused() {
        return refused.sum();
    }

    private void guard(Runnable handler) {
        try {
            handler.run();
        } catch (PsException e) {
            if (e.code() == PsException.Code.INVALID_ARGUMENT || e.code() == PsException.Code.LENGTH_MISMATCH) {
                refused.increment();
            }
            throw PsDescriptor.toWire(e);
        }
    }

    private void tables(ServerCall call) {
        MemorySegment body = call.request();
        if (body.byteSize() != ExportDescriptor.TABLES_REQUEST
                || body.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0) != ExportDescriptor.VERSION) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "an EXPORT_TABLES request is "
                    + ExportDescriptor.TABLES_REQUEST + " bytes starting with version " + ExportDescriptor.VERSION
                    + "; this one has " + body.byteSize() + " bytes");
        }
        long tick = log.seal();
        List<byte[]> creates = new ArrayList<>();
        for (TableStats stats : ps.stats()) {
            SparseTable table;
            try {
                table = ps.table(stats.name());
            } catch (PsException dense) {
                continue;
            }
            if (!log.records(table.name())) {
                continue; // made after the seal: the next poll has it
            }
            byte[] name = PsDescriptor.nameBytes(table.name());
            byte[] create = new byte[PsDescriptor.createBytes(name.length)];
            PsDescriptor.writeCreate(MemorySegment.ofArray(create), name, table.config());
            creates.add(create);
        }
        long size = ExportDescriptor.TABLES_HEADER;
        for (byte[] c : creates) {
            size += 8 + ((c.length + 7) & ~7L);
        }
        MemorySegment out = call.reply(Math.toIntExact(size));
        out.set(PsDescriptor.LONG, 0, log.id());
        out.set(PsDescriptor.LONG, 8, tick);
        out.set(PsDescriptor.INT, 16, creates.size());
        out.set(PsDescriptor.INT, 20, primaries().hash());
        long at = ExportDescriptor.TABLES_HEADER;
        for (byte[] c : creates) {
            out.set(PsDescriptor.INT, at, c.length);
            out.set(PsDescriptor.INT, at + 4, 0);
            MemorySegment.copy(MemorySegment.ofArray(c), 0, out, at + 8, c.length);
            long padded = (c.length + 7) & ~7L;
            out.asSlice(at + 8 + c.length, padded - c.length).fill((byte) 0);
            at += 8 + padded;
        }
        polls.increment();
    }

    private void rows(ServerCall call) {
        ExportDescriptor.RowsRequest r = ExportDescriptor.readRowsRequest(call.request(), MAX_PAGE_ROWS);
        if (r.logId() != log.id()) {
            answer(call, ExportDescriptor.LOG_CHANGED);
            return;
        }
        if (r.upTo() > log.sealed()) {
            answer(call, ExportDescriptor.NOT_SEALED);
            return;
        }
        if (r.deletions() && r.since() > 0 && r.since() < log.forgottenUpTo()) {
            answer(call, ExportDescriptor.FORGOTTEN);
            return;
        }
        SparseTable table = ps.table(r.table());
        long rowBytes = RowTransfer.rowBytes(table);
        long perId = rowBytes + (r.deletions() ? ExportDescriptor.TOMBSTONE_BYTES : 0);
        int max = (int) Math.min(r.maxRows(), Math.max(1, MAX_PAGE_BYTES / perId));
        long[] primary = primaries().slots();
        // Every row changed after the cursor, also those changed after the seal (a tick not
        // sealed yet): a row pushed without pause is changed after nearly every seal before its
        // page is read, and would otherwise never be exported. It comes again next poll; the
        // follower's merge by step count makes that harmless.
        long[] ids = log.changed(r.table(), r.since(), Long.MAX_VALUE, r.afterId(), r.first(),
                slot -> r.wants(slot) && has(primary, slot), max);
        boolean more = ids.length > max;
        int count = Math.min(ids.length, max);
        MemorySegment out = call.reply(Math.toIntExact(ExportDescriptor.PAGE_HEADER + count * perId));
        int copied = RowTransfer.copyPresent(table, ids, count, out.asSlice(ExportDescriptor.PAGE_HEADER));
        if (copied < count) {
            forgetAbsent(table, ids, count, out, copied, rowBytes, r.upTo());
        }
        int dead = 0;
        if (r.deletions()) {
            long at = ExportDescriptor.PAGE_HEADER + copied * rowBytes;
            for (int i = 0; i < count; i++) {
                long floor = log.floor(table.name(), ids[i]);
                if (floor >= 0) {
                    out.set(PsDescriptor.LONG, at, ids[i]);
                    out.set(PsDescriptor.LONG, at + 8, floor);
                    at += ExportDescriptor.TOMBSTONE_BYTES;
                    dead++;
                }
            }
        }
        out.set(PsDescriptor.INT, 0, ExportDescriptor.OK);
        out.set(PsDescriptor.INT, 4, copied);
        out.set(PsDescriptor.LONG, 8, rowBytes);
        // The page's last id, present or not: the next page continues after it.
        out.set(PsDescriptor.LONG, 16, count == 0 ? r.afterId() : ids[count - 1]);
        out.set(PsDescriptor.INT, 24, more ? 1 : 0);
        out.set(PsDescriptor.INT, 28, dead);
        call.truncateReply(Math.toIntExact(ExportDescriptor.PAGE_HEADER + copied * rowBytes
                + (long) dead * ExportDescriptor.TOMBSTONE_BYTES));
        rows.add(copied);
        bytes.add(copied * rowBytes);
        tombstones.add(dead);
    }

    /** Ids of the page whose rows are gone: dropped from the log unless changed since or a deletion is remembered. */
    private void forgetAbsent(SparseTable table, long[] ids, int count, MemorySegment out, int copied, long rowBytes,
            long upTo) {
        java.util.Set<Long> present = new java.util.HashSet<>();
        for (int i = 0; i < copied; i++) {
            present.add(RowTransfer.idOf(out, ExportDescriptor.PAGE_HEADER + i * rowBytes));
        }
        for (int i = 0; i < count; i++) {
            if (!present.contains(ids[i])) {
                log.forget(table.name(), ids[i], upTo);
            }
        }
    }

    private void dense(ServerCall call) {
        ExportDescriptor.DenseRequest r = ExportDescriptor.readDenseRequest(call.request());
        if (r.logId() != log.id()) {
            answer(call, ExportDescriptor.LOG_CHANGED, ExportDescriptor.DENSE_ANSWER_HEADER);
            return;
        }
        if (r.upTo() > log.sealed()) {
            answer(call, ExportDescriptor.NOT_SEALED, ExportDescriptor.DENSE_ANSWER_HEADER);
            return;
        }
        for (String name : log.denseNames()) {
            if (!r.afterName().isEmpty() && name.compareTo(r.afterName()) <= 0) {
                continue;
            }
            int slot = Slots.slotOf(PsDescriptor.denseKey(name));
            if (!r.wants(slot) || !has(primaries().slots(), slot) || log.denseTick(name) <= r.since()) {
                continue;
            }
            DenseTensor tensor = log.denseTensor(name);
            byte[] body;
            try {
                // The tick was read before the copy: the copy holds every change stamped up to it.
                body = DenseMove.body(0, tensor, 0, true);
            } catch (PsException closed) {
                continue; // dropped (moved away): its new owner exports it
            }
            MemorySegment out = call.reply(ExportDescriptor.DENSE_ANSWER_HEADER + body.length);
            out.asSlice(0, ExportDescriptor.DENSE_ANSWER_HEADER).fill((byte) 0);
            out.set(PsDescriptor.INT, 0, ExportDescriptor.OK);
            out.set(PsDescriptor.INT, 4, 1);
            MemorySegment.copy(MemorySegment.ofArray(body), 0, out, ExportDescriptor.DENSE_ANSWER_HEADER, body.length);
            dense.increment();
            bytes.add(body.length);
            return;
        }
        answer(call, ExportDescriptor.OK, ExportDescriptor.DENSE_ANSWER_HEADER);
    }

    private void checkpoint(ServerCall call) {
        MemorySegment body = call.request();
        if (body.byteSize() != ExportDescriptor.CHECKPOINT_REQUEST
                || body.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0) != ExportDescriptor.VERSION) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "an EXPORT_CHECKPOINT request is "
                    + ExportDescriptor.CHECKPOINT_REQUEST + " bytes starting with version " + ExportDescriptor.VERSION
                    + "; this one has " + body.byteSize() + " bytes");
        }
        Optional<ExportCheckpoints.Stamped> latest = ExportCheckpoints.latest(server.checkpointDirectory(), log.id());
        // A checkpoint older than a forgotten deletion would bring back rows deleted since.
        if (latest.isEmpty() || latest.get().stamp().tick() < log.forgottenUpTo()) {
            // With the slots it exports, so that the follower's resync can sweep them (ResyncSweep).
            MemorySegment out = call.reply(ExportDescriptor.CHECKPOINT_HEADER);
            out.fill((byte) 0);
            out.set(PsDescriptor.INT, 0, ExportDescriptor.NO_CHECKPOINT);
            long[] held = primaries().slots();
            for (int i = 0; i < held.length; i++) {
                out.set(PsDescriptor.LONG, 24 + 8L * i, held[i]);
            }
            return;
        }
        ExportStamp stamp = latest.get().stamp();
        byte[] path = latest.get().path().toAbsolutePath().toString().getBytes(StandardCharsets.UTF_8);
        long padded = (path.length + 7) & ~7L;
        MemorySegment out = call.reply(Math.toIntExact(ExportDescriptor.CHECKPOINT_HEADER + padded));
        out.fill((byte) 0);
        out.set(PsDescriptor.INT, 0, ExportDescriptor.OK);
        out.set(PsDescriptor.INT, 4, path.length);
        out.set(PsDescriptor.LONG, 8, stamp.logId());
        out.set(PsDescriptor.LONG, 16, stamp.tick());
        long[] held = primaries().slots(); // what it exports now
        long[] in = stamp.slots();
        for (int i = 0; i < held.length; i++) {
            out.set(PsDescriptor.LONG, 24 + 8L * i, held[i]);
            out.set(PsDescriptor.LONG, 24 + ExportDescriptor.SLOT_BITMAP + 8L * i, in[i]);
        }
        MemorySegment.copy(MemorySegment.ofArray(path), 0, out, ExportDescriptor.CHECKPOINT_HEADER, path.length);
    }

    private static void answer(ServerCall call, int status) {
        answer(call, status, ExportDescriptor.PAGE_HEADER);
    }

    private static void answer(ServerCall call, int status, int headerBytes) {
        MemorySegment out = call.reply(headerBytes);
        out.fill((byte) 0);
        out.set(PsDescriptor.INT, 0, status);
    }
}
