package dev.ferry.ps;

/**
 * When a sparse table stores a row for an id it has not seen before. Until an id is admitted, a
 * pull of it answers the initializer's values without storing a row, and a push to it is counted
 * and dropped; the sighting that admits it creates the row (and a push then applies its step).
 * Ids already stored, rows moved between servers and rows restored from a checkpoint are never
 * filtered. See {@code docs/admission.md}.
 */
public sealed interface Admission {

    /** Every id is stored at its first pull or push (the default). */
    static Admission always() {
        return Always.INSTANCE;
    }

    /**
     * An id is stored at its {@code count}-th sighting (pull or push), counted by a count-min
     * filter of {@code filterCells} one-byte counters per table (split over the shards; 4 hashes)
     * that halves every counter after {@code 8 x filterCells / 4} sightings, so old sightings fade.
     * A count-min filter never under-counts between two halvings, and over-counts only when all
     * four cells of an id are shared with others: an id seen fewer times is admitted early with a
     * small probability, never late.
     *
     * @param count       sightings needed, 1 to 255 (1 is {@link #always()})
     * @param filterCells counters, a power of two from 1,024 to 2^30: the filter's memory in bytes
     */
    static Admission after(int count, int filterCells) {
        return new After(count, filterCells);
    }

    /** {@link #after(int, int)} with {@link After#DEFAULT_CELLS} counters (4 MiB). */
    static Admission after(int count) {
        return new After(count, After.DEFAULT_CELLS);
    }

    /**
     * Each sighting of an id not stored admits it with probability {@code p} (PERSIA's rule):
     * an id seen {@code k} times is stored with probability {@code 1 - (1 - p)^k}. No memory.
     *
     * @param p in (0, 1]
     */
    static Admission probability(double p) {
        return new Probability(p);
    }

    /** Bytes of memory the rule keeps per table. */
    long filterBytes();

    /** Every id stored at once. */
    record Always() implements Admission {
        static final Always INSTANCE = new Always();

        @Override
        public long filterBytes() {
            return 0;
        }
    }

    /** Stored at the {@code count}-th sighting, counted by a decaying count-min filter. */
    record After(int count, int filterCells) implements Admission {
        /** Default filter size: 4 Mi one-byte counters, for up to about a million distinct new ids between halvings. */
        public static final int DEFAULT_CELLS = 1 << 22;

        /** Checks the values. */
        public After {
            if (count < 1 || count > 255) {
                throw TableConfig.invalid("admitAfter count must be in [1, 255]: " + count);
            }
            if (filterCells < 1024 || filterCells > (1 << 30) || Integer.bitCount(filterCells) != 1) {
                throw TableConfig.invalid("filter cells must be a power of two in [1024, 2^30]: " + filterCells);
            }
        }

        @Override
        public long filterBytes() {
            return filterCells;
        }
    }

    /** Stored with probability {@code p} per sighting. */
    record Probability(double p) implements Admission {
        /** Checks the value. */
        public Probability {
            if (!(p > 0 && p <= 1)) {
                throw TableConfig.invalid("admitProbability must be in (0, 1]: " + p);
            }
        }

        @Override
        public long filterBytes() {
            return 0;
        }
    }
}
