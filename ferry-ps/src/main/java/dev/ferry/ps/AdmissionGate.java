package dev.ferry.ps;

import java.util.concurrent.locks.ReentrantLock;

/**
 * One shard's share of a table's {@link Admission} rule: told of every sighting of an id that
 * the shard does not store, it says whether to store it now. Guarded by the shard's lock (every
 * call asserts it is held), so its counters need no atomics.
 */
abstract sealed class AdmissionGate {

    private final ReentrantLock owner;

    AdmissionGate(ReentrantLock owner) {
        this.owner = owner;
    }

    /** The gate of shard {@code shard} of {@code shards} for {@code rule}. */
    static AdmissionGate of(Admission rule, int shard, int shards, long seed, ReentrantLock owner) {
        return switch (rule) {
            case Admission.Always a -> new Open(owner);
            case Admission.After a -> new CountMin(owner, a.count(), a.filterCells() / shards);
            case Admission.Probability p -> new Coin(owner, p.p(), Slots.mix(seed ^ (shard + 1) * 0x9E3779B97F4A7C15L));
        };
    }

    /** Records a sighting of {@code id}, absent from the shard; whether to store it now. */
    final boolean admit(long id) {
        assert owner.isHeldByCurrentThread() : "an admission gate is used under its shard's lock";
        return sighted(id);
    }

    abstract boolean sighted(long id);

    /** Bytes of counters this gate keeps. */
    abstract long bytes();

    /** Everything is stored at once. */
    static final class Open extends AdmissionGate {
        Open(ReentrantLock owner) {
            super(owner);
        }

        @Override
        boolean sighted(long id) {
            return true;
        }

        @Override
        long bytes() {
            return 0;
        }
    }

    /**
     * A count-min filter with conservative update: 4 rows of one-byte saturating counters; an
     * id's count is the least of its 4 cells, and a sighting raises only the cells at that least
     * value. It never under-counts (each cell is at least the count of every id that maps to it)
     * until a halving, which divides every cell by two after {@code 2 x cells} sightings so that
     * ids seen long ago fade. Memory: exactly {@code cells} bytes.
     */
    static final class CountMin extends AdmissionGate {
        private static final int ROWS = 4;
        private final int threshold;
        private final byte[] cells;
        private final int mask;
        private final long halveAfter;
        private long sightings;
        private long halvings;

        CountMin(ReentrantLock owner, int threshold, int cells) {
            super(owner);
            this.threshold = threshold;
            this.cells = new byte[Math.max(ROWS, cells)];
            this.mask = this.cells.length / ROWS - 1;
            this.halveAfter = 2L * this.cells.length;
        }

        @Override
        boolean sighted(long id) {
            long h = Slots.mix(id ^ 0x5DEECE66DL);
            int a = (int) h;
            int b = (int) (h >>> 32) | 1;
            int width = mask + 1;
            int least = 255;
            for (int r = 0; r < ROWS; r++) {
                least = Math.min(least, cells[r * width + ((a + r * b) & mask)] & 0xFF);
            }
            int count = Math.min(255, least + 1);
            for (int r = 0; r < ROWS; r++) {
                int at = r * width + ((a + r * b) & mask);
                if ((cells[at] & 0xFF) < count) {
                    cells[at] = (byte) count;
                }
            }
            if (++sightings >= halveAfter) {
                halve();
            }
            return count >= threshold;
        }

        /** Count of {@code id} now (the least of its cells); for tests. */
        int estimate(long id) {
            long h = Slots.mix(id ^ 0x5DEECE66DL);
            int a = (int) h;
            int b = (int) (h >>> 32) | 1;
            int least = 255;
            for (int r = 0; r < ROWS; r++) {
                least = Math.min(least, cells[r * (mask + 1) + ((a + r * b) & mask)] & 0xFF);
            }
            return least;
        }

        private void halve() {
            for (int i = 0; i < cells.length; i++) {
                cells[i] = (byte) ((cells[i] & 0xFF) >>> 1);
            }
            sightings = 0;
            halvings++;
        }

        long halvings() {
            return halvings;
        }

        @Override
        long bytes() {
            return cells.length;
        }
    }

    /** Each sighting admits with probability {@code p}: a xorshift stream per shard, seeded from the table. */
    static final class Coin extends AdmissionGate {
        private final long limit;
        private long state;

        Coin(ReentrantLock owner, double p, long seed) {
            super(owner);
            // p of the 2^53 outcomes of the next 53 random bits, rounded: p = 1 admits always.
            this.limit = p >= 1 ? Long.MAX_VALUE : (long) (p * 0x1p53);
            this.state = seed == 0 ? 0x9E3779B97F4A7C15L : seed;
        }

        @Override
        boolean sighted(long id) {
            state ^= state << 13;
            state ^= state >>> 7;
            state ^= state << 17;
            return (state >>> 11) < limit;
        }

        @Override
        long bytes() {
            return 0;
        }
    }
}
