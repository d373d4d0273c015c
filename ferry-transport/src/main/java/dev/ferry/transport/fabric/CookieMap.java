package dev.ferry.transport.fabric;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Predicate;

/**
 * Sends by their cookie (a positive {@code long}, 0 free): open addressing with linear probing
 * and deletion by backward shift, so that a put, get or remove allocates nothing once the table
 * has grown to the number of sends in flight. Owned by the fabric token's holder (the progress
 * thread, or a caller posting its own send).
 *
 * @param <V> what a cookie names
 */
final class CookieMap<V> {

    private long[] keys;
    private Object[] values;
    private int size;

    /** A map that holds {@code initialCapacity} mappings before it first grows. */
    CookieMap(int initialCapacity) {
        int capacity = Integer.highestOneBit(Math.max(16, initialCapacity) * 4 - 1); // at most half full
        keys = new long[capacity];
        values = new Object[capacity];
    }

    /** Maps {@code cookie} (non-zero, not mapped yet) to {@code value}. */
    void put(long cookie, V value) {
        if (cookie == 0) {
            throw new IllegalArgumentException("cookie 0 is the empty slot");
        }
        if (2 * (size + 1) > keys.length) {
            grow();
        }
        int mask = keys.length - 1;
        int i = slot(cookie, mask);
        while (keys[i] != 0) {
            if (keys[i] == cookie) {
                throw new IllegalStateException("cookie " + cookie + " already mapped");
            }
            i = (i + 1) & mask;
        }
        keys[i] = cookie;
        values[i] = value;
        size++;
    }

    /** What {@code cookie} maps to, or null. */
    @SuppressWarnings("unchecked")
    V get(long cookie) {
        int i = find(cookie);
        return i < 0 ? null : (V) values[i];
    }

    /** Removes {@code cookie}'s mapping; what it mapped to, or null. */
    @SuppressWarnings("unchecked")
    V remove(long cookie) {
        int i = find(cookie);
        if (i < 0) {
            return null;
        }
        V value = (V) values[i];
        removeAt(i);
        return value;
    }

    /** Removes every mapping whose value {@code matches}, and returns those values in cookie order (teardown; allocates). */
    @SuppressWarnings("unchecked")
    List<V> removeIf(Predicate<V> matches) {
        List<V> removed = new ArrayList<>();
        long[] cookies = new long[size];
        int n = 0;
        for (int i = 0; i < keys.length; i++) {
            if (keys[i] != 0 && matches.test((V) values[i])) {
                cookies[n++] = keys[i];
            }
        }
        // Removal shifts entries back: collect the cookies first, then remove each by its cookie,
        // oldest (smallest) first.
        Arrays.sort(cookies, 0, n);
        for (int k = 0; k < n; k++) {
            removed.add(remove(cookies[k]));
        }
        return removed;
    }

    int size() {
        return size;
    }

    private int find(long cookie) {
        if (cookie == 0) {
            return -1;
        }
        int mask = keys.length - 1;
        for (int i = slot(cookie, mask); keys[i] != 0; i = (i + 1) & mask) {
            if (keys[i] == cookie) {
                return i;
            }
        }
        return -1;
    }

    /** Empties slot {@code i} and shifts back the entries after it that probed past it. */
    private void removeAt(int i) {
        int mask = keys.length - 1;
        int hole = i;
        for (int j = (i + 1) & mask; keys[j] != 0; j = (j + 1) & mask) {
            int home = slot(keys[j], mask);
            // j's entry may fill the hole if its home is not within (hole, j] cyclically.
            if (((j - home) & mask) >= ((j - hole) & mask)) {
                keys[hole] = keys[j];
                values[hole] = values[j];
                hole = j;
            }
        }
        keys[hole] = 0;
        values[hole] = null;
        size--;
    }

    private void grow() {
        long[] oldKeys = keys;
        Object[] oldValues = values;
        keys = new long[oldKeys.length * 2];
        values = new Object[oldValues.length * 2];
        int mask = keys.length - 1;
        for (int k = 0; k < oldKeys.length; k++) {
            if (oldKeys[k] != 0) {
                int i = slot(oldKeys[k], mask);
                while (keys[i] != 0) {
                    i = (i + 1) & mask;
                }
                keys[i] = oldKeys[k];
                values[i] = oldValues[k];
            }
        }
        Arrays.fill(oldValues, null);
    }

    /** Cookies are sequential: a multiplicative mix spreads runs of them over the table. */
    private static int slot(long cookie, int mask) {
        long h = cookie * 0x9E3779B97F4A7C15L;
        return (int) (h >>> 32) & mask;
    }
}
