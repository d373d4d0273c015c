package dev.ferry.ps;

import java.util.Arrays;

/**
 * An open-addressing map of id to a few longs with linear probing; the second long of a slot
 * is a tick, 0 marking a free slot. A slot's longs sit side by side, so a mark touches one
 * cache line. Grows by doubling at half full; deletion shifts the following run back. Not
 * thread-safe: {@link ExportLog} guards each one by its stripe's lock.
 */
final class ExportIdMap {

    final int stride;
    long[] entries;
    int size;

    ExportIdMap(int stride) {
        this.stride = stride;
        this.entries = new long[stride * 64];
    }

    int capacity() {
        return entries.length / stride;
    }

    /** The slot of {@code id}, or -1. */
    int find(long id, long hash) {
        long[] e = entries;
        int mask = capacity() - 1;
        for (int i = (int) hash & mask;; i = (i + 1) & mask) {
            if (e[stride * i + 1] == 0) {
                return -1;
            }
            if (e[stride * i] == id) {
                return i;
            }
        }
    }

    /** Sets the tick of {@code id}, adding it if absent; returns its slot. */
    int put(long id, long hash, long tick) {
        if ((size + 1) * 2 > capacity()) {
            grow();
        }
        long[] e = entries;
        int mask = capacity() - 1;
        for (int i = (int) hash & mask;; i = (i + 1) & mask) {
            if (e[stride * i + 1] == 0) {
                e[stride * i] = id;
                e[stride * i + 1] = tick;
                size++;
                return i;
            }
            if (e[stride * i] == id) {
                e[stride * i + 1] = tick;
                return i;
            }
        }
    }

    /** Removes {@code id} if its tick is at most {@code upTo}. */
    void remove(long id, long hash, long upTo) {
        long[] e = entries;
        int mask = capacity() - 1;
        int i = (int) hash & mask;
        while (e[stride * i + 1] != 0 && e[stride * i] != id) {
            i = (i + 1) & mask;
        }
        if (e[stride * i + 1] == 0 || e[stride * i + 1] > upTo) {
            return;
        }
        // Backward shift: move later entries of the run into the hole where their probe allows.
        int hole = i;
        for (int j = (hole + 1) & mask; e[stride * j + 1] != 0; j = (j + 1) & mask) {
            int home = (int) (Slots.mix(e[stride * j]) >>> 6) & mask;
            boolean movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
            if (movable) {
                System.arraycopy(e, stride * j, e, stride * hole, stride);
                hole = j;
            }
        }
        Arrays.fill(e, stride * hole, stride * hole + stride, 0L);
        size--;
    }

    private void grow() {
        long[] old = entries;
        entries = new long[old.length * 2];
        size = 0;
        for (int i = 0; i < old.length; i += stride) {
            if (old[i + 1] != 0) {
                int at = put(old[i], Slots.mix(old[i]) >>> 6, old[i + 1]);
                System.arraycopy(old, i + 2, entries, stride * at + 2, stride - 2);
            }
        }
    }
}
