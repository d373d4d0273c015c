package dev.ferry.ps;

/**
 * The slots one server owns in a {@link SlotTable}, a bit per slot (8 KiB, so it stays in the
 * first cache levels while rows stream through them). A server checks every id it is asked for
 * against it. Immutable.
 */
public final class OwnedSlots {

    private final int server;
    private final long[] bits = new long[Slots.COUNT / Long.SIZE];

    /** A server that owns no slot (one the table does not name): nothing to scan. */
    OwnedSlots(int server) {
        this.server = server;
    }

    OwnedSlots(int server, int[] serverOfSlot) {
        this.server = server;
        for (int slot = 0; slot < serverOfSlot.length; slot++) {
            if (serverOfSlot[slot] == server) {
                bits[slot >>> 6] |= 1L << slot;
            }
        }
    }

    /** The server whose slots these are. */
    public int server() {
        return server;
    }

    /** Whether the server owns {@code slot}. */
    public boolean ownsSlot(int slot) {
        return (bits[slot >>> 6] & (1L << slot)) != 0;
    }

    /** A copy of the bitmap: slot {@code s} is bit {@code s & 63} of word {@code s >>> 6}. */
    public long[] toWords() {
        return bits.clone();
    }

    /**
     * The index of the first of {@code ids[0, count)} that the server does not own, or -1 if it
     * owns them all.
     */
    public int firstForeign(long[] ids, int count) {
        long[] bits = this.bits;
        for (int i = 0; i < count; i++) {
            int slot = Slots.slotOf(ids[i]);
            if ((bits[slot >>> 6] & (1L << slot)) == 0) {
                return i;
            }
        }
        return -1;
    }
}
