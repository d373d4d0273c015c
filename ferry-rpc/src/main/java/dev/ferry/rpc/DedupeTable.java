package dev.ferry.rpc;

import java.util.Iterator;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The outcomes of non-idempotent calls, so that a retried call runs at most once and gets the
 * response of its first run. Keyed by client id, then call id; thread-safe.
 *
 * <p>Bounded three ways: a client's acknowledgement (every call id below it has completed at
 * the client) trims its entries; a client whose entries exceed the entry or byte bound loses
 * its oldest completed ones; a client not heard from for the time-to-live loses them all.
 * Every id trimmed or evicted raises the client's <em>floor</em>: a call below the floor that
 * is not in the table is answered "outcome lost" and never run, since it may have run already.
 */
final class DedupeTable {

    /** What to do with an arriving call. */
    enum Verdict {
        /** First sight: run it, then {@link #complete}. */
        RUN,
        /** Running now: its outcome will go to the latest sender. */
        RUNNING,
        /** Done: replay {@link Entry#outcome}. */
        DONE,
        /** Below the floor and gone: refuse, do not run. */
        LOST
    }

    /** One call's state. The outcome is a complete frame, header included. */
    static final class Entry {
        final long callId;
        Object replyTo;
        byte[] outcome;

        Entry(long callId, Object replyTo) {
            this.callId = callId;
            this.replyTo = replyTo;
        }
    }

    /** The admission of a call: the verdict and, for {@code DONE}, the entry. */
    record Admission(Verdict verdict, Entry entry) {
    }

    private static final Admission RUN = new Admission(Verdict.RUN, null);
    private static final Admission RUNNING = new Admission(Verdict.RUNNING, null);
    private static final Admission LOST = new Admission(Verdict.LOST, null);

    private static final class Ledger {
        final TreeMap<Long, Entry> entries = new TreeMap<>();
        long floor;
        long bytes;
        long lastSeenNanos;
    }

    private final int maxEntries;
    private final long maxBytes;
    private final long ttlNanos;
    private final ConcurrentHashMap<Long, Ledger> ledgers = new ConcurrentHashMap<>();

    DedupeTable(int maxEntries, long maxBytes, long ttlNanos) {
        this.maxEntries = maxEntries;
        this.maxBytes = maxBytes;
        this.ttlNanos = ttlNanos;
    }

    /**
     * Admits call {@code callId} of {@code clientId}, first applying the client's
     * acknowledgement {@code ack}; {@code replyTo} is where the outcome should go.
     */
    Admission admit(long clientId, long callId, long ack, Object replyTo) {
        Ledger ledger = ledgers.computeIfAbsent(clientId, id -> new Ledger());
        synchronized (ledger) {
            ledger.lastSeenNanos = System.nanoTime();
            trim(ledger, ack);
            Entry entry = ledger.entries.get(callId);
            if (entry != null) {
                entry.replyTo = replyTo;
                return entry.outcome == null ? RUNNING : new Admission(Verdict.DONE, entry);
            }
            if (callId < ledger.floor) {
                return LOST;
            }
            ledger.entries.put(callId, new Entry(callId, replyTo));
            evict(ledger);
            return RUN;
        }
    }

    /**
     * Stores the outcome of a call admitted with {@link Verdict#RUN}; returns where to send it
     * (the latest sender), or null if the entry went meanwhile.
     */
    Object complete(long clientId, long callId, byte[] outcome) {
        Ledger ledger = ledgers.get(clientId);
        if (ledger == null) {
            return null;
        }
        synchronized (ledger) {
            Entry entry = ledger.entries.get(callId);
            if (entry == null) {
                return null;
            }
            entry.outcome = outcome;
            ledger.bytes += outcome.length;
            evict(ledger);
            return entry.replyTo;
        }
    }

    /** Applies an acknowledgement that came without an at-most-once call (a heartbeat, an idempotent call). */
    void acknowledge(long clientId, long ack) {
        if (ledgers.isEmpty()) {
            return; // no client has made an at-most-once call: nothing to trim, no id to box
        }
        Ledger ledger = ledgers.get(clientId);
        if (ledger != null) {
            synchronized (ledger) {
                ledger.lastSeenNanos = System.nanoTime();
                trim(ledger, ack);
            }
        }
    }

    private static void trim(Ledger ledger, long ack) {
        if (ack <= ledger.floor) {
            return;
        }
        ledger.floor = ack;
        Map<Long, Entry> head = ledger.entries.headMap(ack);
        for (Entry entry : head.values()) {
            if (entry.outcome != null) {
                ledger.bytes -= entry.outcome.length;
            }
        }
        head.clear();
    }

    private void evict(Ledger ledger) {
        if (ledger.entries.size() <= maxEntries && ledger.bytes <= maxBytes) {
            return;
        }
        Iterator<Entry> it = ledger.entries.values().iterator();
        while (it.hasNext() && (ledger.entries.size() > maxEntries || ledger.bytes > maxBytes)) {
            Entry entry = it.next();
            if (entry.outcome == null) {
                continue;
            }
            it.remove();
            ledger.bytes -= entry.outcome.length;
            ledger.floor = Math.max(ledger.floor, entry.callId + 1);
        }
    }

    /** Forgets clients not heard from for the time-to-live. */
    void expire(long nowNanos) {
        ledgers.values().removeIf(ledger -> {
            synchronized (ledger) {
                return nowNanos - ledger.lastSeenNanos > ttlNanos && ledger.entries.values().stream()
                        .allMatch(e -> e.outcome != null);
            }
        });
    }

    /** Entries held now, over all clients. */
    int size() {
        int n = 0;
        for (Ledger ledger : ledgers.values()) {
            synchronized (ledger) {
                n += ledger.entries.size();
            }
        }
        return n;
    }
}
