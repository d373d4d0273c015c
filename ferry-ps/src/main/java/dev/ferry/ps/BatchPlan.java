package dev.ferry.ps;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Objects;

/**
 * The client's plan for one pull or push batch: the batch's ids deduplicated, split by the server
 * that owns them ({@link SlotTable}), and the way back to the caller's order.
 *
 * <p>A batch of {@code count} ids becomes {@link #parts()} parts, one per server that owns any
 * of them, in ascending server order. Part {@code p} carries {@link #ids(int) ids(p)}: each
 * distinct id once, in order of first appearance in the batch. For a pull, the server answers
 * part {@code p} with {@code partSize(p)} rows of {@code dimension} little-endian f32 values, and
 * {@link #scatterRows} copies each to every position of the caller's batch that asked for it,
 * duplicates included. For a push, {@link #sumGradients} adds the caller's gradient rows of each
 * distinct id into one, so a server applies one optimizer step per id per batch.
 *
 * <p>Immutable once built; safe to share between threads.
 */
public final class BatchPlan {

    private final int count;
    private final int[] servers;
    private final long[][] partIds;
    /** Caller positions grouped by part, ascending within a part; part p is [start[p], start[p+1]). */
    private final int[] positions;
    private final int[] start;
    /** For each entry of {@code positions}: the row of that id within its part. */
    private final int[] rowInPart;

    private BatchPlan(int count, int[] servers, long[][] partIds, int[] positions, int[] start, int[] rowInPart) {
        this.count = count;
        this.servers = servers;
        this.partIds = partIds;
        this.positions = positions;
        this.start = start;
        this.rowInPart = rowInPart;
    }

    /**
     * Plans the batch {@code ids[offset, offset + count)}.
     *
     * @throws PsException {@code INVALID_ARGUMENT} if the range is outside the array
     */
    public static BatchPlan of(long[] ids, int offset, int count, SlotTable slots) {
        Objects.requireNonNull(ids, "ids");
        Objects.requireNonNull(slots, "slots");
        if (offset < 0 || count < 0 || offset > ids.length - count) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "ids range [" + offset + ", +" + count
                    + ") is outside an array of " + ids.length);
        }
        // Dedupe with an open-addressing map id -> unique index (+1, so that 0 is empty).
        int capacity = Integer.highestOneBit(Math.max(4, count) * 2 - 1) << 1;
        int mask = capacity - 1;
        long[] keys = new long[capacity];
        int[] values = new int[capacity];
        int[] uniqueOfPosition = new int[count];
        long[] uniqueIds = new long[count];
        int[] uniqueServer = new int[count];
        int uniques = 0;
        for (int i = 0; i < count; i++) {
            long id = ids[offset + i];
            long hash = Slots.mix(id);
            int at = (int) hash & mask;
            while (values[at] != 0 && keys[at] != id) {
                at = (at + 1) & mask;
            }
            if (values[at] == 0) {
                keys[at] = id;
                values[at] = uniques + 1;
                uniqueIds[uniques] = id;
                uniqueServer[uniques] = slots.serverOfSlot(Slots.slotOfHash(hash));
                uniques++;
            }
            uniqueOfPosition[i] = values[at] - 1;
        }
        // Parts: the servers present, ascending.
        int[] perServer = new int[slots.serverCount()];
        for (int u = 0; u < uniques; u++) {
            perServer[uniqueServer[u]]++;
        }
        int parts = 0;
        int[] partOfServer = new int[slots.serverCount()];
        for (int s = 0; s < perServer.length; s++) {
            partOfServer[s] = perServer[s] > 0 ? parts++ : -1;
        }
        int[] servers = new int[parts];
        long[][] partIds = new long[parts][];
        for (int s = 0; s < perServer.length; s++) {
            if (partOfServer[s] >= 0) {
                servers[partOfServer[s]] = s;
                partIds[partOfServer[s]] = new long[perServer[s]];
            }
        }
        int[] filled = new int[parts];
        int[] rowOfUnique = new int[uniques];
        for (int u = 0; u < uniques; u++) {
            int p = partOfServer[uniqueServer[u]];
            rowOfUnique[u] = filled[p];
            partIds[p][filled[p]++] = uniqueIds[u];
        }
        // Positions grouped by part (a stable counting sort).
        int[] start = new int[parts + 1];
        for (int i = 0; i < count; i++) {
            start[partOfServer[uniqueServer[uniqueOfPosition[i]]] + 1]++;
        }
        for (int p = 0; p < parts; p++) {
            start[p + 1] += start[p];
        }
        int[] cursor = Arrays.copyOf(start, parts);
        int[] positions = new int[count];
        int[] rowInPart = new int[count];
        for (int i = 0; i < count; i++) {
            int u = uniqueOfPosition[i];
            int at = cursor[partOfServer[uniqueServer[u]]]++;
            positions[at] = i;
            rowInPart[at] = rowOfUnique[u];
        }
        return new BatchPlan(count, servers, partIds, positions, start, rowInPart);
    }

    /** The number of ids in the caller's batch, duplicates included. */
    public int count() {
        return count;
    }

    /** The number of distinct ids. */
    public int uniqueCount() {
        int n = 0;
        for (long[] part : partIds) {
            n += part.length;
        }
        return n;
    }

    /** The number of parts (servers this batch goes to). */
    public int parts() {
        return servers.length;
    }

    /** The server index of a part. */
    public int server(int part) {
        return servers[part];
    }

    /** The number of distinct ids in a part (rows in its request and response). */
    public int partSize(int part) {
        return partIds[part].length;
    }

    /** A copy of the distinct ids of a part, in order of first appearance in the batch. */
    public long[] ids(int part) {
        return partIds[part].clone();
    }

    /**
     * Where each caller position's answer is: {@code partOf[i]} is the part of position
     * {@code i} and {@code rowOf[i]} its row within that part's request and response, so that a
     * client can hand out views of the response buffers in the caller's order without copying.
     *
     * @throws PsException {@code LENGTH_MISMATCH} if an array is shorter than {@link #count()}
     */
    public void locate(int[] partOf, int[] rowOf) {
        Objects.requireNonNull(partOf, "partOf");
        Objects.requireNonNull(rowOf, "rowOf");
        if (partOf.length < count || rowOf.length < count) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "locate needs arrays of " + count + " positions");
        }
        for (int p = 0; p < servers.length; p++) {
            for (int at = start[p]; at < start[p + 1]; at++) {
                partOf[positions[at]] = p;
                rowOf[positions[at]] = rowInPart[at];
            }
        }
    }

    /** Writes the distinct ids of a part as little-endian i64 at the start of {@code out} (a request buffer). */
    public void writeIds(int part, MemorySegment out) {
        long[] ids = partIds[part];
        checkBytes("out", out, (long) ids.length * Long.BYTES);
        for (int i = 0; i < ids.length; i++) {
            out.set(RowLayout.LONG, (long) i * Long.BYTES, ids[i]);
        }
    }

    /**
     * Copies the rows a server returned for a part to every caller position that asked for them.
     *
     * @param rows      {@code partSize(part)} rows of {@code dimension} f32, in {@link #ids(int)} order
     * @param dimension floats per row
     * @param out       {@link #count()} rows of {@code dimension} f32 in the caller's order
     */
    public void scatterRows(int part, MemorySegment rows, int dimension, MemorySegment out) {
        long rowBytes = rowBytes(dimension);
        checkBytes("rows", rows, partIds[part].length * rowBytes);
        checkBytes("out", out, count * rowBytes);
        for (int at = start[part]; at < start[part + 1]; at++) {
            MemorySegment.copy(rows, rowInPart[at] * rowBytes, out, positions[at] * rowBytes, rowBytes);
        }
    }

    /**
     * Sums the caller's gradient rows of each distinct id of a part into {@code out}, in
     * {@link #ids(int)} order. Rows are added in the caller's order, in f32.
     *
     * @param gradients {@link #count()} rows of {@code dimension} f32 in the caller's order
     * @param out       {@code partSize(part)} rows of {@code dimension} f32 (a request buffer)
     */
    public void sumGradients(int part, MemorySegment gradients, int dimension, MemorySegment out) {
        long rowBytes = rowBytes(dimension);
        checkBytes("gradients", gradients, count * rowBytes);
        checkBytes("out", out, partIds[part].length * rowBytes);
        out.asSlice(0, partIds[part].length * rowBytes).fill((byte) 0);
        for (int at = start[part]; at < start[part + 1]; at++) {
            long from = positions[at] * rowBytes;
            long to = rowInPart[at] * rowBytes;
            for (int j = 0; j < dimension; j++) {
                long o = (long) j * Float.BYTES;
                out.set(RowLayout.FLOAT, to + o, out.get(RowLayout.FLOAT, to + o) + gradients.get(RowLayout.FLOAT, from + o));
            }
        }
    }

    private static long rowBytes(int dimension) {
        if (dimension < 1) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "dimension must be >= 1: " + dimension);
        }
        return (long) dimension * Float.BYTES;
    }

    private static void checkBytes(String what, MemorySegment segment, long needed) {
        if (segment.byteSize() < needed) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH,
                    what + " holds " + segment.byteSize() + " bytes; the plan needs " + needed);
        }
    }
}
