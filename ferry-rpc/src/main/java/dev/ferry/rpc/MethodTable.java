package dev.ferry.rpc;

import java.util.HashMap;
import java.util.Map;

/**
 * What a server registered, by method id: read on every request with one volatile read and a
 * probe of an int array (no boxed id), written rarely (at registration) by building a new table.
 * Reads from any thread; writes synchronize on the table.
 *
 * @param <V> what is registered for an id
 */
final class MethodTable<V> {

    /** Open addressing, linear probing; at most half full. */
    private record Table(int[] ids, Object[] values, int mask) {
    }

    /** Every entry, for building the next table; guarded by this. */
    private final Map<Integer, V> entries = new HashMap<>();
    private volatile Table table = build(Map.of());

    /** What is registered for {@code id}, or null. */
    @SuppressWarnings("unchecked")
    V get(int id) {
        Table t = table;
        for (int i = spread(id) & t.mask;; i = (i + 1) & t.mask) {
            Object value = t.values[i];
            if (value == null || t.ids[i] == id) {
                return (V) value;
            }
        }
    }

    /** Registers {@code value} for {@code id} unless something is; returns what was there, or null. */
    synchronized V putIfAbsent(int id, V value) {
        V taken = entries.putIfAbsent(id, value);
        if (taken == null) {
            table = build(entries);
        }
        return taken;
    }

    /** Registers {@code value} for {@code id} in place of what was there. */
    synchronized void put(int id, V value) {
        entries.put(id, value);
        table = build(entries);
    }

    private static Table build(Map<Integer, ?> entries) {
        int size = Integer.highestOneBit(Math.max(4, entries.size()) * 2 - 1) << 1;
        int[] ids = new int[size];
        Object[] values = new Object[size];
        int mask = size - 1;
        for (Map.Entry<Integer, ?> e : entries.entrySet()) {
            int i = spread(e.getKey()) & mask;
            while (values[i] != null) {
                i = (i + 1) & mask;
            }
            ids[i] = e.getKey();
            values[i] = e.getValue();
        }
        return new Table(ids, values, mask);
    }

    private static int spread(int id) {
        int h = id * 0x9E3779B9;
        return h ^ (h >>> 16);
    }
}
