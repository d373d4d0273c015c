package dev.ferry.ps;

/**
 * Where an id lives: every id hashes to one of {@link #COUNT} virtual slots, and a
 * {@link SlotTable} maps slots to servers. Moving a slot moves all its ids, so servers can be
 * added without rehashing ids.
 *
 * <p>The 64-bit mix spreads its bits independently, and the parameter server uses disjoint bits
 * of it for separate choices so that they do not correlate:
 * <pre>
 *  63          48 47      40 39                                             0
 *  +-------------+----------+------------------------------------------------+
 *  | slot (16)   | shard(8) | hash-table probe start (low bits)              |
 *  +-------------+----------+------------------------------------------------+
 * </pre>
 * A server owns a subset of slots; were its lock stripes chosen from the slot bits, only some
 * of them would ever be used.
 */
public final class Slots {

    /** Number of virtual slots: 65,536, so that 1,000 servers still own about 65 slots each. */
    public static final int COUNT = 1 << 16;

    private Slots() {
    }

    /**
     * SplitMix64 of the id: a bijection on 64 bits whose output bits each depend on every
     * input bit, so that sequential ids spread evenly.
     */
    public static long mix(long id) {
        long z = id + 0x9E3779B97F4A7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /** The virtual slot of an id, in {@code [0, COUNT)}. */
    public static int slotOf(long id) {
        return slotOfHash(mix(id));
    }

    static int slotOfHash(long hash) {
        return (int) (hash >>> 48);
    }

    /** The lock stripe (shard) of a hash inside one table; {@code shards} is a power of two up to 256. */
    static int shardOfHash(long hash, int shards) {
        return (int) (hash >>> 40) & (shards - 1);
    }
}
