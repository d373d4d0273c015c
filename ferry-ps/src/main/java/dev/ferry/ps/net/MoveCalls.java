package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import dev.ferry.ps.PsException;
import dev.ferry.ps.SparseTable;
import dev.ferry.rpc.RemoteException;
import dev.ferry.rpc.RequestWriter;
import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcMethod;
import dev.ferry.rpc.RpcResponse;

/**
 * The bodies a slot move's source sends ({@code MOVE_BEGIN}, {@code MOVE_DEDUPE}, {@code
 * MOVE_ROWS}) and the one blocking call that sends each; stateless.
 */
final class MoveCalls {

    /** Deadline of one server-to-server call; a forward is retried after it. */
    static final long CALL_MILLIS = 5_000;

    private MoveCalls() {
    }

    /** {@code MOVE_BEGIN}: the move's groups and the create body of every sparse table. */
    static byte[] beginBody(long moveId, int[] groups, List<SparseTable> tables) {
        List<byte[]> creates = new ArrayList<>();
        long bytes = PsDescriptor.payloadOffset(0) + ((4L * groups.length + 7) & ~7L) + 8;
        for (SparseTable t : tables) {
            byte[] name = PsDescriptor.nameBytes(t.name());
            byte[] create = new byte[PsDescriptor.createBytes(name.length)];
            PsDescriptor.writeCreate(MemorySegment.ofArray(create), name, t.config());
            creates.add(create);
            bytes += 8 + ((create.length + 7) & ~7L);
        }
        byte[] body = new byte[Math.toIntExact(bytes)];
        MemorySegment s = MemorySegment.ofArray(body);
        long at = PsDescriptor.writeHeader(s, PsDescriptor.SPARSE, new byte[0], 0, groups.length, 0);
        PsDescriptor.stamp(s, 0, moveId);
        for (int i = 0; i < groups.length; i++) {
            s.set(PsDescriptor.INT, at + 4L * i, groups[i]);
        }
        at += (4L * groups.length + 7) & ~7L;
        s.set(PsDescriptor.INT, at, creates.size());
        at += 8;
        for (byte[] create : creates) {
            s.set(PsDescriptor.INT, at, create.length);
            MemorySegment.copy(MemorySegment.ofArray(create), 0, s, at + 8, create.length);
            at += 8 + ((create.length + 7) & ~7L);
        }
        return body;
    }

    /** {@code MOVE_DEDUPE}: the dedupe ids {@code window} recorded for the moving groups. */
    static byte[] dedupeBody(long moveId, int[] groups, DedupeWindow window) {
        List<long[]> entries = new ArrayList<>();
        for (int g : groups) {
            for (long d : window.ids(g)) {
                entries.add(new long[] {g, d});
            }
        }
        int at = PsDescriptor.payloadOffset(0);
        byte[] body = new byte[at + entries.size() * ReplicationDescriptor.GROUP_ENTRY];
        MemorySegment s = MemorySegment.ofArray(body);
        PsDescriptor.writeHeader(s, PsDescriptor.SPARSE, new byte[0], 0, entries.size(), 0);
        PsDescriptor.stamp(s, 0, moveId);
        for (int i = 0; i < entries.size(); i++) {
            ReplicationDescriptor.writeGroup(s, at, i, (int) entries.get(i)[0], entries.get(i)[1]);
        }
        return body;
    }

    /** {@code MOVE_ROWS} of the snapshot: {@code count} whole rows of a table. */
    static byte[] rowsBody(long moveId, byte[] name, int dimension, int count, MemorySegment rows) {
        int at = PsDescriptor.payloadOffset(name.length);
        byte[] body = new byte[Math.toIntExact(at + rows.byteSize())];
        MemorySegment s = MemorySegment.ofArray(body);
        PsDescriptor.writeHeader(s, PsDescriptor.SPARSE, name, dimension, count, 0);
        PsDescriptor.stamp(s, 0, moveId);
        MemorySegment.copy(rows, 0, s, at, rows.byteSize());
        return body;
    }

    /** One blocking call with {@link #CALL_MILLIS}; the server's refusals come back as {@link PsException}s. */
    static void send(RpcChannel target, RpcMethod method, byte[] body) {
        send(target, method, body, CALL_MILLIS);
    }

    /** One blocking call with {@code millis} (at least 1); the server's refusals come back as {@link PsException}s. */
    static void send(RpcChannel target, RpcMethod method, byte[] body, long millis) {
        long deadline = Math.max(1, millis);
        RequestWriter writer = segment -> MemorySegment.copy(MemorySegment.ofArray(body), 0, segment, 0, body.length);
        try {
            RpcResponse response = target.call(method, body.length, writer, deadline).get(deadline + 1_000,
                    TimeUnit.MILLISECONDS);
            response.release();
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof RemoteException remote) {
                PsException ps = PsDescriptor.toPsException(remote, target.address());
                if (ps != null) {
                    throw ps;
                }
            }
            throw cause instanceof RuntimeException r ? r : new IllegalStateException(cause);
        } catch (TimeoutException e) {
            throw new IllegalStateException("no answer from " + target.address() + " in time", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }
}
