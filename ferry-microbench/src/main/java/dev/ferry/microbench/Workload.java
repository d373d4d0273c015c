package dev.ferry.microbench;

import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * The default workload's ids, drawn up front so that sampling is not measured: Zipf with exponent
 * 1.09 over {@code [0, space)} (id 0 the hottest), batch sizes log-uniform in [16, 4,096].
 */
final class Workload {

    /** Ids in the default table. */
    static final int SPACE = 1 << 20;
    /** The default skew. */
    static final double ALPHA = 1.09;
    /** Weights per row. */
    static final int DIMENSION = 64;

    private final long[] stream;
    private final SplittableRandom random;
    private int next;

    /** {@code length} Zipf ids over {@code [0, space)} from a cumulative table (one binary search each). */
    Workload(int space, double alpha, int length, long seed) {
        double[] cdf = new double[space];
        double sum = 0;
        for (int k = 0; k < space; k++) {
            sum += Math.pow(k + 1, -alpha);
            cdf[k] = sum;
        }
        random = new SplittableRandom(seed);
        stream = new long[length];
        for (int i = 0; i < length; i++) {
            int at = Arrays.binarySearch(cdf, random.nextDouble() * sum);
            stream[i] = Math.min(space - 1, at >= 0 ? at : -at - 1);
        }
    }

    /** The default workload with a stream of 2^20 draws. */
    static Workload defaults(long seed) {
        return new Workload(SPACE, ALPHA, 1 << 20, seed);
    }

    /** The next {@code count} ids of the stream (with duplicates, as a client's batch has them). */
    long[] batch(int count) {
        long[] ids = new long[count];
        for (int i = 0; i < count; i++) {
            ids[i] = stream[next++ & (stream.length - 1)];
        }
        return ids;
    }

    /** The next {@code count} distinct ids of the stream, in order of first appearance (a server's part). */
    long[] distinct(int count) {
        long[] ids = new long[count];
        java.util.HashSet<Long> seen = new java.util.HashSet<>();
        int n = 0;
        while (n < count) {
            long id = stream[next++ & (stream.length - 1)];
            if (seen.add(id)) {
                ids[n++] = id;
            }
        }
        return ids;
    }

    /** A batch size, log-uniform in {@code [min, max]}. */
    int batchSize(int min, int max) {
        int n = (int) Math.exp(Math.log(min) + random.nextDouble() * (Math.log(max + 1.0) - Math.log(min)));
        return Math.max(min, Math.min(max, n));
    }

    /** Gradients in [-0.01, 0.01), little-endian f32. */
    static void fillGradients(java.lang.foreign.MemorySegment out, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        for (long at = 0; at + Float.BYTES <= out.byteSize(); at += Float.BYTES) {
            out.set(Rows.FLOAT, at, (float) r.nextDouble(-0.01, 0.01));
        }
    }
}
