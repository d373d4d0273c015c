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
 * <p>Two ways to hold one: {@link #of} builds a new plan, which nobody re-plans, so it is
 * immutable and safe to share between threads. A caller on the data path instead keeps a plan
 * per thread, made by {@link #BatchPlan()}, and re-plans it with {@link #plan} for each batch:
 * its arrays are reused (they grow to the largest batch seen), so planning allocates nothing in
 * steady state. A re-planned plan belongs to the thread that plans it, and its previous batch's
 * answers are gone.
 */
public final class BatchPlan {

    private static final int[] NO_INTS = new int[0];
    private static final long[] NO_LONGS = new long[0];
    /** 2^64 / the golden ratio: multiplicative hashing spreads strided and clustered ids over the top bits. */
    private static final long FIBONACCI = 0x9E3779B97F4A7C15L;

    private int count;
    private int uniques;
    private int parts;
    /** Per part: its server, ascending. */
    private int[] servers = NO_INTS;
    /** Per part + 1: where its ids start in {@link #partIds}. */
    private int[] partStart = new int[1];
    /** The distinct ids, grouped by part, in order of first appearance within a part. */
    private long[] partIds = NO_LONGS;
    /** Caller positions grouped by part, ascending within a part; part p is [start[p], start[p+1]). */
    private int[] positions = NO_INTS;
    private int[] start = new int[1];
    /** For each entry of {@code positions}: the row of that id within its part. */
    private int[] rowInPart = NO_INTS;

    // Working arrays, kept between batches.
    /**
     * Open addressing, id to unique index (from 1; 0 empty); the id itself is read from
     * {@link #uniqueIds}, so the table is 4 bytes a slot (32 KiB for a 4,096-id batch: it stays
     * in L1 with the distinct ids). All zero between plans.
     */
    private int[] indexOf = NO_INTS;
    /** Per caller position: its unique index (from 1). */
    private int[] uniqueOfPosition = NO_INTS;
    // Per unique index (from 1; entry 0 is the dedupe's sentinel): the id, how many positions
    // hold it (all zero between plans), its server, its row within its part, its part.
    private long[] uniqueIds = NO_LONGS;
    private int[] repeats = NO_INTS;
    private int[] uniqueServer = NO_INTS;
    private int[] rowOfUnique = NO_INTS;
    private int[] partOfUnique = NO_INTS;
    private int[] perServer = NO_INTS;
    private int[] partOfServer = NO_INTS;
    private int[] positionsOfServer = NO_INTS;
    private int[] cursor = NO_INTS;

    /** An empty plan (no ids, no parts) to be {@linkplain #plan re-planned}. */
    public BatchPlan() {
    }

    /**
     * Plans the batch {@code ids[offset, offset + count)} in a new plan.
     *
     * @throws PsException {@code INVALID_ARGUMENT} if the range is outside the array
     */
    public static BatchPlan of(long[] ids, int offset, int count, SlotTable slots) {
        return new BatchPlan().plan(ids, offset, count, slots);
    }

    /**
     * Re-plans this plan for the batch {@code ids[offset, offset + count)}, reusing its arrays;
     * the same answers as {@link #of}. Returns this plan.
     *
     * @throws PsException {@code INVALID_ARGUMENT} if the range is outside the array; the plan is
     *                     then empty
     */
    public BatchPlan plan(long[] ids, int offset, int count, SlotTable slots) {
        Objects.requireNonNull(ids, "ids");
        Objects.requireNonNull(slots, "slots");
        this.count = 0;
        this.uniques = 0;
        this.parts = 0;
        if (offset < 0 || count < 0 || offset > ids.length - count) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "ids range [" + offset + ", +" + count
                    + ") is outside an array of " + ids.length);
        }
        int serverCount = slots.serverCount();
        int capacity = Integer.highestOneBit(Math.max(4, count) * 2 - 1) << 1;
        reserve(count, capacity, serverCount);
        // Dedupe: each distinct id gets the next unique index (from 1), in order of first
        // appearance. Branch-free but for the probe loop: uniqueIds[0] holds the id itself, so an
        // empty entry (0) ends the probe like a match, and a new id takes index u + 1 by
        // arithmetic. (Whether an id is new is random in a Zipf batch, about every other id: as a
        // branch it was mispredicted that often.) The table's index is a multiplicative hash's
        // top bits (one multiply); the id's full mix, for its server, is computed in a loop of its
        // own over the distinct ids, below.
        int mask = capacity - 1;
        int shift = 64 - Integer.numberOfTrailingZeros(capacity);
        int[] indexOf = this.indexOf;
        long[] uniqueIds = this.uniqueIds;
        int[] uniqueOfPosition = this.uniqueOfPosition;
        int[] repeats = this.repeats;
        int u = 0;
        for (int i = 0; i < count; i++) {
            long id = ids[offset + i];
            int at = (int) ((id * FIBONACCI) >>> shift);
            uniqueIds[0] = id;
            int value;
            while (uniqueIds[value = indexOf[at]] != id) {
                at = (at + 1) & mask;
            }
            int fresh = (value - 1) >>> 31; // 1 if the entry was empty
            u += fresh;
            value += fresh * u;
            indexOf[at] = value;
            uniqueIds[value] = id;
            uniqueOfPosition[i] = value;
            repeats[value]++;
        }
        Arrays.fill(indexOf, 0, capacity, 0);
        // Each distinct id's server (independent loads of the slot table), the distinct ids and
        // the positions per server.
        int[] uniqueServer = this.uniqueServer;
        int[] perServer = this.perServer;
        int[] positionsOfServer = this.positionsOfServer;
        Arrays.fill(perServer, 0, serverCount, 0);
        Arrays.fill(positionsOfServer, 0, serverCount, 0);
        for (int k = 1; k <= u; k++) {
            int server = slots.serverOfSlot(Slots.slotOfHash(Slots.mix(uniqueIds[k])));
            uniqueServer[k] = server;
            perServer[server]++;
            positionsOfServer[server] += repeats[k];
            repeats[k] = 0;
        }
        // Parts: the servers present, ascending.
        int parts = 0;
        for (int s = 0; s < serverCount; s++) {
            if (perServer[s] > 0) {
                partOfServer[s] = parts;
                servers = ensure(servers, parts + 1);
                partStart = ensure(partStart, parts + 2);
                servers[parts] = s;
                partStart[parts + 1] = partStart[parts] + perServer[s];
                parts++;
            }
        }
        partStart[0] = 0;
        // The distinct ids by part; each id's row within its part.
        int[] cursor = this.cursor = ensure(this.cursor, parts + 1);
        System.arraycopy(partStart, 0, cursor, 0, parts);
        for (int k = 1; k <= u; k++) {
            int p = partOfServer[uniqueServer[k]];
            int at = cursor[p]++;
            partIds[at] = uniqueIds[k];
            rowOfUnique[k] = at - partStart[p];
            partOfUnique[k] = p;
        }
        // Positions grouped by part (a stable counting sort).
        start = ensure(start, parts + 1);
        if (parts == 1) {
            start[0] = 0;
            start[1] = count;
            for (int i = 0; i < count; i++) {
                positions[i] = i;
                rowInPart[i] = uniqueOfPosition[i] - 1;
            }
        } else {
            start[0] = 0;
            for (int p = 0; p < parts; p++) {
                start[p + 1] = start[p] + positionsOfServer[servers[p]];
            }
            System.arraycopy(start, 0, cursor, 0, parts);
            for (int i = 0; i < count; i++) {
                int k = uniqueOfPosition[i];
                int at = cursor[partOfUnique[k]]++;
                positions[at] = i;
                rowInPart[at] = rowOfUnique[k];
            }
        }
        this.count = count;
        this.uniques = u;
        this.parts = parts;
        return this;
    }

    private void reserve(int count, int capacity, int serverCount) {
        if (indexOf.length < capacity) {
            indexOf = new int[capacity];
        }
        if (uniqueOfPosition.length < count) {
            uniqueOfPosition = new int[count];
            uniqueIds = new long[count + 1];
            repeats = new int[count + 1];
            uniqueServer = new int[count + 1];
            rowOfUnique = new int[count + 1];
            partOfUnique = new int[count + 1];
            partIds = new long[count];
            positions = new int[count];
            rowInPart = new int[count];
        }
        if (perServer.length < serverCount) {
            perServer = new int[serverCount];
            partOfServer = new int[serverCount];
            positionsOfServer = new int[serverCount];
        }
    }

    private static int[] ensure(int[] array, int length) {
        return array.length >= length ? array : Arrays.copyOf(array, Math.max(length, array.length * 2));
    }

    /** The number of ids in the caller's batch, duplicates included. */
    public int count() {
        return count;
    }

    /** The number of distinct ids. */
    public int uniqueCount() {
        return uniques;
    }

    /** The number of parts (servers this batch goes to). */
    public int parts() {
        return parts;
    }

    /** The server index of a part. */
    public int server(int part) {
        return servers[checkPart(part)];
    }

    /** The number of distinct ids in a part (rows in its request and response). */
    public int partSize(int part) {
        checkPart(part);
        return partStart[part + 1] - partStart[part];
    }

    /** A copy of the distinct ids of a part, in order of first appearance in the batch. */
    public long[] ids(int part) {
        checkPart(part);
        return Arrays.copyOfRange(partIds, partStart[part], partStart[part + 1]);
    }

    /**
     * Copies the distinct ids of a part, in {@link #ids(int)} order, into {@code into} from index
     * 0, with nothing allocated; returns how many.
     *
     * @throws PsException {@code LENGTH_MISMATCH} if {@code into} is shorter than the part
     */
    public int copyIds(int part, long[] into) {
        int n = partSize(part);
        if (into.length < n) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "a part of " + n + " ids does not fit in "
                    + into.length);
        }
        System.arraycopy(partIds, partStart[part], into, 0, n);
        return n;
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
        for (int p = 0; p < parts; p++) {
            for (int at = start[p]; at < start[p + 1]; at++) {
                partOf[positions[at]] = p;
                rowOf[positions[at]] = rowInPart[at];
            }
        }
    }

    /** Writes the distinct ids of a part as little-endian i64 at the start of {@code out} (a request buffer). */
    public void writeIds(int part, MemorySegment out) {
        writeIds(part, out, 0);
    }

    /** Writes the distinct ids of a part as little-endian i64 at {@code offset} of {@code out}, with no view made. */
    public void writeIds(int part, MemorySegment out, long offset) {
        int n = partSize(part);
        if (offset < 0) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "negative offset " + offset);
        }
        checkBytes("out", out, offset + (long) n * Long.BYTES);
        MemorySegment.copy(partIds, partStart[part], out, RowLayout.LONG, offset, n);
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
        checkBytes("rows", rows, partSize(part) * rowBytes);
        checkBytes("out", out, count * rowBytes);
        for (int at = start[part]; at < start[part + 1]; at++) {
            MemorySegment.copy(rows, rowInPart[at] * rowBytes, out, positions[at] * rowBytes, rowBytes);
        }
    }

    /**
     * {@link #scatterRows(int, MemorySegment, int, MemorySegment)} into the caller's own array:
     * {@code out} holds {@link #count()} rows of {@code dimension} floats from index 0, and no
     * view of it is made.
     */
    public void scatterRows(int part, MemorySegment rows, int dimension, float[] out) {
        long rowBytes = rowBytes(dimension);
        checkBytes("rows", rows, partSize(part) * rowBytes);
        if (out.length < (long) count * dimension) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "out holds " + out.length + " floats; the plan needs "
                    + (long) count * dimension);
        }
        for (int at = start[part]; at < start[part + 1]; at++) {
            MemorySegment.copy(rows, RowLayout.FLOAT, rowInPart[at] * rowBytes, out, positions[at] * dimension, dimension);
        }
    }

    /**
     * Sums the caller's gradient rows of each distinct id of a part into {@code out}, in
     * {@link #ids(int)} order. Rows are added in the caller's order, in f32, starting from zero
     * (vectorised where the JVM allows, see {@code Kernels}).
     *
     * @param gradients {@link #count()} rows of {@code dimension} f32 in the caller's order
     * @param out       {@code partSize(part)} rows of {@code dimension} f32 (a request buffer)
     */
    public void sumGradients(int part, MemorySegment gradients, int dimension, MemorySegment out) {
        long rowBytes = rowBytes(dimension);
        checkBytes("gradients", gradients, count * rowBytes);
        checkBytes("out", out, partSize(part) * rowBytes);
        // Every row starts from zero and every caller row is added to its distinct id's row: one
        // path for all, since about half the positions are an id's first (at random: a branch
        // between a first copy and an add was mispredicted every other row). 0 + g is g but for
        // -0, as "starting from zero" says.
        Kernels.zero(out, 0, partSize(part) * rowBytes);
        Kernels.addRows(out, rowInPart, gradients, positions, start[part], start[part + 1], dimension);
    }

    private int checkPart(int part) {
        if (part < 0 || part >= parts) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "part " + part + " of a plan of " + parts);
        }
        return part;
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
