package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

import dev.ferry.ps.ExportLog;
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
    private final ExportLog log;
    private final LongAdder polls = new LongAdder();
    private final LongAdder rows = new LongAdder();
    private final LongAdder bytes = new LongAdder();
    private final LongAdder refused = new LongAdder();

    private ExportService(ParameterServer ps) {
        this.ps = ps;
        this.log = new ExportLog(ps);
    }

    /** Serves the export of {@code server}'s tables on its RPC server; recording starts with the first poll. */
    public static ExportService attach(PsServer server) {
        ExportService service = new ExportService(server.parameterServer());
        server.rpcServer().register(ExportDescriptor.EXPORT_TABLES, call -> service.guard(() -> service.tables(call)))
                .register(ExportDescriptor.EXPORT_ROWS, call -> service.guard(() -> service.rows(call)));
        return service;
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
        out.set(PsDescriptor.INT, 20, 0);
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
        SparseTable table = ps.table(r.table());
        long rowBytes = RowTransfer.rowBytes(table);
        int max = (int) Math.min(r.maxRows(), Math.max(1, MAX_PAGE_BYTES / rowBytes));
        long[] ids = log.changed(r.table(), r.since(), r.upTo(), r.afterId(), r.first(), r::wants, max);
        boolean more = ids.length > max;
        int count = Math.min(ids.length, max);
        MemorySegment out = call.reply(Math.toIntExact(ExportDescriptor.PAGE_HEADER + count * rowBytes));
        int copied = RowTransfer.copyPresent(table, ids, count, out.asSlice(ExportDescriptor.PAGE_HEADER));
        if (copied < count) {
            forgetAbsent(table, ids, count, out, copied, rowBytes, r.upTo());
        }
        out.set(PsDescriptor.INT, 0, ExportDescriptor.OK);
        out.set(PsDescriptor.INT, 4, copied);
        out.set(PsDescriptor.LONG, 8, rowBytes);
        // The page's last id, present or not: the next page continues after it.
        out.set(PsDescriptor.LONG, 16, count == 0 ? r.afterId() : ids[count - 1]);
        out.set(PsDescriptor.INT, 24, more ? 1 : 0);
        out.set(PsDescriptor.INT, 28, 0);
        call.truncateReply(Math.toIntExact(ExportDescriptor.PAGE_HEADER + copied * rowBytes));
        rows.add(copied);
        bytes.add(copied * rowBytes);
    }

    /** Ids of the page whose rows are gone (evicted): dropped from the log unless changed since. */
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

    private static void answer(ServerCall call, int status) {
        MemorySegment out = call.reply(ExportDescriptor.PAGE_HEADER);
        out.fill((byte) 0);
        out.set(PsDescriptor.INT, 0, status);
    }
}
