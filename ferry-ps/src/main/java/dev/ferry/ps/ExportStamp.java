package dev.ferry.ps;

import java.util.Objects;

/**
 * Where a checkpoint stands in a training server's live export: the {@link ExportLog}'s id, the
 * tick sealed before the checkpoint's rows were read (every change stamped up to it is in the
 * checkpoint), and the slots whose rows the server held then (primary or backup; a bitmap of
 * {@link Slots#COUNT} bits, slot {@code s} = bit {@code s % 64} of long {@code s / 64}). Kept in
 * the checkpoint's manifest (version 3), so that a serving server can load the checkpoint and
 * ask only for the changes after the tick.
 */
public record ExportStamp(long logId, long tick, long[] slots) {

    /** Checks the bitmap's size and the tick. */
    public ExportStamp {
        Objects.requireNonNull(slots, "slots");
        if (slots.length != Slots.COUNT / 64 || tick < 0) {
            throw new IllegalArgumentException("an export stamp takes " + Slots.COUNT / 64
                    + " longs of slots and a tick >= 0; got " + slots.length + " and " + tick);
        }
        slots = slots.clone();
    }

    /** Whether the checkpoint holds the rows of {@code slot}. */
    public boolean holds(int slot) {
        return (slots[slot >>> 6] & (1L << (slot & 63))) != 0;
    }

    @Override
    public long[] slots() {
        return slots.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof ExportStamp e && e.logId == logId && e.tick == tick
                && java.util.Arrays.equals(e.slots, slots);
    }

    @Override
    public int hashCode() {
        return Long.hashCode(logId) * 31 + Long.hashCode(tick);
    }

    @Override
    public String toString() {
        return "ExportStamp[log " + Long.toHexString(logId) + ", tick " + tick + "]";
    }
}
