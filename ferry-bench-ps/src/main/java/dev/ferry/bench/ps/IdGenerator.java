package dev.ferry.bench.ps;

import java.util.SplittableRandom;

/**
 * Ids and batch sizes of a benchmark's requests. Ids are drawn from {@code [0, space)}: Zipf with
 * exponent {@code alpha} (id 0 the hottest; 1.09 is the skew of production embedding lookups the
 * issue asks for) or uniform when {@code alpha} is 0. Batch sizes are log-uniform in
 * {@code [minBatch, maxBatch]}, or fixed when the two are equal. One instance per thread.
 */
final class IdGenerator {

    /** Ids in the pool: 8 MiB per thread, 256 batches of the largest size. */
    static final int POOL = 1 << 20;

    private final SplittableRandom random;
    private final long space;
    private final ZipfSampler zipf;
    /** Zipf ids drawn up front, so that sampling (two logarithms per id) is not measured as request cost. */
    private final long[] pool;
    private final int minBatch;
    private final int maxBatch;
    private final double logMin;
    private final double logSpan;

    IdGenerator(long seed, long space, double alpha, int minBatch, int maxBatch) {
        if (space < 1 || minBatch < 1 || maxBatch < minBatch) {
            throw new IllegalArgumentException("need space >= 1 and 1 <= minBatch <= maxBatch");
        }
        this.random = new SplittableRandom(seed);
        this.space = space;
        this.zipf = alpha > 0 ? new ZipfSampler(space, alpha) : null;
        this.pool = zipf != null ? new long[POOL] : null;
        if (pool != null) {
            for (int i = 0; i < POOL; i++) {
                pool[i] = zipf.sample(random) - 1;
            }
        }
        this.minBatch = minBatch;
        this.maxBatch = maxBatch;
        this.logMin = Math.log(minBatch);
        this.logSpan = Math.log(maxBatch + 1.0) - logMin;
    }

    /** The size of the next batch. */
    int batchSize() {
        if (minBatch == maxBatch) {
            return minBatch;
        }
        int n = (int) Math.exp(logMin + random.nextDouble() * logSpan);
        return Math.max(minBatch, Math.min(maxBatch, n));
    }

    /** Fills {@code ids[0, count)}: a run of the Zipf pool from a random start, or uniform draws. */
    void fill(long[] ids, int count) {
        if (pool != null) {
            int at = random.nextInt(POOL);
            for (int i = 0; i < count; i++) {
                ids[i] = pool[(at + i) & (POOL - 1)];
            }
            return;
        }
        for (int i = 0; i < count; i++) {
            ids[i] = random.nextLong(space);
        }
    }

    SplittableRandom random() {
        return random;
    }
}
