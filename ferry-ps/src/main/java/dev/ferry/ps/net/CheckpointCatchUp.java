package dev.ferry.ps.net;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.atomic.LongAdder;
import java.util.logging.Logger;

import dev.ferry.ps.DenseTransfer;
import dev.ferry.ps.ExportCheckpoints;
import dev.ferry.ps.ExportStamp;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.RowTransfer;
import dev.ferry.ps.Slots;
import dev.ferry.ps.SparseTable;
import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcResponse;

/**
 * A follower's catch-up from a training server's latest checkpoint instead of a full resync: asks
 * where it is ({@code EXPORT_CHECKPOINT}: the path, on a file system both servers mount at the
 * same path, and the tick sealed before its rows were read), loads the rows of this server's
 * slots that the training server is the primary of now (the slots it exports), and returns the tick, from which the follower asks
 * only for the later deltas. Falls back (returns 0: a full resync) when there is no checkpoint
 * stamped by the training server's current log, when its tick or log id does not match what the
 * manifest says, when it lacks a slot this server wants and the training server exports now, or
 * when it cannot be read. Rows merge by step count, so a row of the checkpoint newer than a
 * later delta is kept and a later delta newer than the checkpoint's row replaces it.
 *
 * <p>Runs on the follower's poller thread; the counters are read from any thread.
 */
final class CheckpointCatchUp {

    private static final Logger LOG = Logger.getLogger(CheckpointCatchUp.class.getName());

    private final DeltaFollower follower;
    private final ParameterServer ps;
    private final LongAdder loads = new LongAdder();
    private final LongAdder rows = new LongAdder();
    private final LongAdder fallbacks = new LongAdder();
    private volatile String lastFallback;

    CheckpointCatchUp(DeltaFollower follower, ParameterServer ps) {
        this.follower = follower;
        this.ps = ps;
    }

    long loads() {
        return loads.sum();
    }

    long rows() {
        return rows.sum();
    }

    long fallbacks() {
        return fallbacks.sum();
    }

    String lastFallback() {
        return lastFallback;
    }

    /**
     * Loads the rows of {@code wanted} from the latest checkpoint of the training server at
     * {@code channel} whose live log is {@code logId}; returns the checkpoint's tick, or 0 if none
     * could be used (the caller then resyncs from tick 0). Tells {@code sweep} the slots the
     * training server exports and the ids of the rows loaded.
     */
    long fromCheckpoint(RpcChannel channel, String source, long logId, long[] wanted, ResyncSweep sweep) {
        byte[] request = new byte[ExportDescriptor.CHECKPOINT_REQUEST];
        request[0] = ExportDescriptor.VERSION;
        long tick;
        long[] load = new long[Slots.COUNT / 64];
        Path path;
        try (RpcResponse answer = follower.call(channel, ExportDescriptor.EXPORT_CHECKPOINT, request)) {
            MemorySegment in = answer.segment();
            if (in.byteSize() < ExportDescriptor.CHECKPOINT_HEADER) {
                return fallback(source, "an EXPORT_CHECKPOINT answer of " + in.byteSize() + " bytes");
            }
            int status = in.get(PsDescriptor.INT, 0);
            if (status == ExportDescriptor.OK || status == ExportDescriptor.NO_CHECKPOINT) {
                long[] held = new long[load.length]; // the slots it is primary of (exports)
                for (int i = 0; i < held.length; i++) {
                    held[i] = in.get(PsDescriptor.LONG, 24 + 8L * i);
                }
                sweep.slots(held, wanted);
            }
            if (status == ExportDescriptor.NO_CHECKPOINT) {
                return fallback(source, "no checkpoint stamped by its current export log");
            }
            int length = in.get(PsDescriptor.INT, 4);
            if (status != ExportDescriptor.OK || length <= 0
                    || ExportDescriptor.CHECKPOINT_HEADER + (long) length > in.byteSize()) {
                return fallback(source, "a malformed EXPORT_CHECKPOINT answer (status " + status + ", path of "
                        + length + " bytes)");
            }
            if (in.get(PsDescriptor.LONG, 8) != logId) {
                return fallback(source, "its checkpoint belongs to another export log (it restarted)");
            }
            tick = in.get(PsDescriptor.LONG, 16);
            for (int i = 0; i < load.length; i++) {
                long held = in.get(PsDescriptor.LONG, 24 + 8L * i); // the slots it is primary of
                long inCheckpoint = in.get(PsDescriptor.LONG, 24 + ExportDescriptor.SLOT_BITMAP + 8L * i);
                long need = wanted[i] & held;
                if ((need & ~inCheckpoint) != 0) {
                    int slot = i * 64 + Long.numberOfTrailingZeros(need & ~inCheckpoint);
                    return fallback(source, "its checkpoint lacks slot " + slot + ", which it exports now");
                }
                load[i] = need;
            }
            path = Path.of(new String(in.asSlice(ExportDescriptor.CHECKPOINT_HEADER, length)
                    .toArray(java.lang.foreign.ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8));
        }
        if (Arrays.stream(load).allMatch(bits -> bits == 0)) {
            loads.increment(); // nothing of it wanted (no slots yet): the tick alone will do
            return tick;
        }
        long[] merged = {0};
        ExportStamp stamp;
        try {
            stamp = ExportCheckpoints.load(path, ps.config(), table -> {
                SparseTable local = LocalCopies.table(ps, table.config(), source);
                long rowBytes = RowTransfer.rowBytes(local);
                sweep.table(local.name());
                RowTransfer.export(table, id -> wants(load, Slots.slotOf(id)), 1 << 20, run -> {
                    merged[0] += RowTransfer.merge(local, run);
                    sweep.rows(local.name(), run, rowBytes);
                });
            }, tensor -> {
                if (wants(load, Slots.slotOf(PsDescriptor.denseKey(tensor.name())))) {
                    try (Arena arena = Arena.ofConfined()) {
                        MemorySegment row = arena.allocate(DenseTransfer.rowBytes(tensor), Long.BYTES);
                        DenseTransfer.copy(tensor, row);
                        DenseTransfer.merge(LocalCopies.dense(ps, tensor.config(), source), row, false);
                    }
                }
            });
        } catch (PsException unreadable) {
            rows.add(merged[0]);
            sweep.restart(); // the resync from tick 0 delivers every row again
            return fallback(source, "its checkpoint " + path + " cannot be loaded: " + unreadable.getMessage());
        }
        rows.add(merged[0]);
        if (stamp == null || stamp.logId() != logId || stamp.tick() != tick) {
            sweep.restart();
            return fallback(source, "checkpoint " + path + " is stamped " + stamp + ", not tick " + tick
                    + " of the log named");
        }
        loads.increment();
        long n = merged[0];
        LOG.info(() -> "export: caught up with training server " + source + " from checkpoint " + path + " (tick "
                + tick + ", " + n + " rows); asking for the later deltas");
        return tick;
    }

    private static boolean wants(long[] bits, int slot) {
        return (bits[slot >>> 6] & (1L << (slot & 63))) != 0;
    }

    private long fallback(String source, String why) {
        fallbacks.increment();
        lastFallback = "training server " + source + ": " + why;
        LOG.info(() -> "export: full resync from " + lastFallback);
        return 0;
    }
}
