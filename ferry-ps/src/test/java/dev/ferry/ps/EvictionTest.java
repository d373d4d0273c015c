package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Eviction by TTL with an injected clock, what a pull and a push of an evicted id do, the free
 * list (memory does not grow), the capacity bound under a stream of ten times the capacity, and
 * the settings' checks. The policies against a reference model: {@link EvictionPolicyTest};
 * concurrency: {@link EvictionConcurrencyTest}.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class EvictionTest {

    static final int D = 4;
    private static final long SECOND = 1_000_000_000L;

    static float[] pull(SparseTable t, long... ids) {
        float[] out = new float[ids.length * D];
        t.gather(ids, 0, ids.length, MemorySegment.ofArray(out));
        return out;
    }

    static void push(SparseTable t, long[] ids, float value) {
        float[] g = new float[ids.length * D];
        java.util.Arrays.fill(g, value);
        t.apply(ids, 0, ids.length, MemorySegment.ofArray(g));
    }

    static long[] range(long from, long to) {
        return java.util.stream.LongStream.range(from, to).toArray();
    }

    static long[] range(long from, long to, long step) {
        return java.util.stream.LongStream.iterate(from, i -> i < to, i -> i + step).toArray();
    }

    static long steps(SparseTable t, long id) {
        byte[] row = t.rawRow(id);
        return row == null ? -1 : MemorySegment.ofArray(row).get(RowLayout.LONG, RowLayout.STEPS_OFFSET);
    }

    private static TableConfig ttlTable(String name, Duration ttl) {
        return TableConfig.of(name, D, Optimizer.sgd(1)).withInitializer(Initializer.uniform(-1, 1, 3)).withShards(4)
                .evictAfter(ttl);
    }

    @Test
    void rowsNotUpdatedWithinTheTtlAreDeletedAtTheNextScan() {
        AtomicLong clock = new AtomicLong(1_000 * SECOND);
        long t0 = clock.get();
        SparseTable t = new SparseTable(ttlTable("ttl", Duration.ofSeconds(10)), PsConfig.defaults(), false, clock::get);
        try {
            TableEvictor evictor = t.evictor();
            assertNotNull(evictor);
            push(t, range(0, 100), 1f);             // created and updated at t0
            clock.set(t0 + 5 * SECOND);
            push(t, range(0, 50), 1f);              // updated at t0 + 5
            pull(t, range(100, 150));               // created at t0 + 5, never pushed
            pull(t, range(50, 100));                // pulls are not updates
            clock.set(t0 + 10 * SECOND + 1);
            assertEquals(50, evictor.runOnce());
            for (long id = 0; id < 150; id++) {
                assertEquals(id < 50 || id >= 100, t.rawRow(id) != null, "id " + id);
            }
            assertEquals(100, t.rows());
            assertEquals(50, t.stats().evictedTtl());
            assertEquals(0, t.stats().evictedCapacity());
            clock.set(t0 + 15 * SECOND);
            assertEquals(0, evictor.runOnce(), "at exactly the TTL a row is not older than it");
            clock.set(t0 + 15 * SECOND + 1);
            pull(t, 60);                            // re-created at t0 + 15 s + 1 ns
            // Scans run at most every TTL/16 (625 ms): 100 rows are now expired, but wait for the next one.
            assertEquals(0, evictor.runOnce(), "the previous scan was less than TTL/16 ago");
            assertEquals(101, t.rows());
            clock.set(t0 + 16 * SECOND);
            assertEquals(100, evictor.runOnce(), "everything updated at t0 + 5 s is gone; 60 stays");
            assertEquals(1, t.rows());
            assertNotNull(t.rawRow(60));
            TableStats stats = t.stats();
            assertEquals(150, stats.evictedTtl());
            assertEquals(151, stats.admitted());
            assertEquals(stats.admitted() - stats.evictedTtl() - stats.evictedCapacity(), stats.rows());
        } finally {
            t.close();
        }
    }

    @Test
    void aPullOfAnEvictedIdAnswersInitialValuesAndAPushStartsAFreshRow() {
        AtomicLong clock = new AtomicLong();
        SparseTable t = new SparseTable(ttlTable("again", Duration.ofSeconds(1)), PsConfig.defaults(), false, clock::get);
        SparseTable fresh = new SparseTable(ttlTable("fresh", Duration.ofSeconds(1)), PsConfig.defaults(), false,
                clock::get);
        try {
            float[] initial = pull(fresh, 7, 8);
            push(t, new long[] {7, 8}, 0.5f);
            push(t, new long[] {7, 8}, 0.5f);
            assertEquals(2, steps(t, 7));
            clock.set(2 * SECOND);
            assertEquals(2, t.evictor().runOnce());
            assertNull(t.rawRow(7));
            // A pull: the initializer's values, like a never-seen id (and, admitted, a new row).
            assertArrayEquals(java.util.Arrays.copyOfRange(initial, 0, D), pull(t, 7));
            assertEquals(0, steps(t, 7));
            // A push: a fresh row from the initializer, one step; the earlier steps are gone.
            push(t, new long[] {8}, 0.25f);
            assertEquals(1, steps(t, 8));
            float[] eight = pull(t, 8);
            for (int j = 0; j < D; j++) {
                assertEquals(initial[D + j] - 0.25f, eight[j], 0f, "element " + j);
            }
        } finally {
            t.close();
            fresh.close();
        }
    }

    @Test
    void anEvictedIdIsReadmittedThroughTheAdmissionRule() {
        AtomicLong clock = new AtomicLong();
        TableConfig config = ttlTable("adm", Duration.ofSeconds(1)).withAdmission(Admission.after(3, 1 << 12));
        SparseTable t = new SparseTable(config, PsConfig.defaults(), false, clock::get);
        try {
            pull(t, 5);
            pull(t, 5);
            assertNull(t.rawRow(5));
            pull(t, 5);
            assertNotNull(t.rawRow(5), "admitted at the third sighting");
            clock.set(2 * SECOND);
            assertEquals(1, t.evictor().runOnce());
            assertNull(t.rawRow(5));
            // The filter still counts 3 sightings (no halving yet): the next sighting stores it again.
            assertEquals(3, ((AdmissionGate.CountMin) t.gate(Slots.shardOfHash(Slots.mix(5), 4))).estimate(5));
            push(t, new long[] {5}, 1f);
            assertEquals(1, steps(t, 5));
            TableStats stats = t.stats();
            assertEquals(2, stats.admitted());
            assertEquals(2, stats.rejected());
            assertEquals(1, stats.evictedTtl());
        } finally {
            t.close();
        }
    }

    @Test
    void evictedSlotsAreReusedAndTheTableMemoryDoesNotGrow() {
        AtomicLong clock = new AtomicLong();
        SparseTable t = new SparseTable(ttlTable("reuse", Duration.ofSeconds(1)), PsConfig.defaults(), false,
                clock::get);
        try {
            push(t, range(0, 5_000), 1f);
            long reserved = t.stats().reservedBytes();
            int[] slots = slots(t);
            for (int round = 1; round <= 4; round++) {
                clock.addAndGet(2 * SECOND);
                assertEquals(5_000, t.evictor().runOnce());
                assertEquals(0, t.rows());
                assertNull(t.rawRow(10));
                push(t, range(0, 5_000), 1f); // the same shares per shard: exactly the same slots
                assertEquals(5_000, t.rows());
                assertEquals(reserved, t.stats().reservedBytes(), "round " + round);
                assertArrayEquals(slots, slots(t), "round " + round);
                assertEquals(1, steps(t, 10), "a fresh row");
            }
            // Other ids: a shard grows only past the most rows it held before.
            clock.addAndGet(2 * SECOND);
            assertEquals(5_000, t.evictor().runOnce());
            push(t, range(10_000, 14_000), 1f);
            int[] after = slots(t);
            for (int s = 0; s < slots.length; s++) {
                assertEquals(slots[s], after[s], "shard " + s + " holds fewer than 5,000 / 4 x 1.25 rows");
            }
            assertEquals(reserved, t.stats().reservedBytes());
        } finally {
            t.close();
        }
    }

    private static int[] slots(SparseTable t) {
        int[] slots = new int[t.shardCount()];
        for (int s = 0; s < slots.length; s++) {
            Shard shard = t.shard(s);
            shard.lock.lock();
            try {
                slots[s] = shard.rows();
            } finally {
                shard.lock.unlock();
            }
        }
        return slots;
    }

    /**
     * A stream of 10x the capacity through a server whose evictor thread runs in the background:
     * the table never holds more than its capacity, every id answers, and the counters add up.
     * {@code -Dferry.test.scale=full}: 1M capacity, 10M ids.
     */
    @Test
    void theCapacityHoldsUnderAStreamOfTenTimesIt() {
        int capacity = TestScale.pick(10_000, 1_000_000);
        long stream = 10L * capacity;
        int batch = 1_000;
        TableConfig config = TableConfig.of("cap", D, Optimizer.sgd(0.5))
                .capacity(capacity, EvictionPolicy.LEAST_RECENTLY_UPDATED, 0.1);
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            SparseTable t = ps.createTable(config);
            long[] ids = new long[batch];
            float[] g = new float[batch * D];
            java.util.Arrays.fill(g, 1f);
            float[] out = new float[batch * D];
            long maxRows = 0;
            long start = System.nanoTime();
            for (long from = 0; from < stream; from += batch) {
                for (int i = 0; i < batch; i++) {
                    ids[i] = (from + i) * 0x9E3779B97F4A7C15L; // distinct, spread
                }
                if ((from / batch) % 2 == 0) {
                    t.apply(ids, 0, batch, MemorySegment.ofArray(g));
                } else {
                    t.gather(ids, 0, batch, MemorySegment.ofArray(out));
                    for (int i = 0; i < out.length; i++) {
                        assertEquals(0f, out[i], "a new id pulls its initial values");
                    }
                }
                maxRows = Math.max(maxRows, t.rows());
                assertTrue(t.rows() <= capacity, t.rows() + " rows");
                if (TestScale.full() && (from / batch) % 1_000 == 0) {
                    System.out.printf("capacity %,d: %,d of %,d ids, %,d rows%n", capacity, from, stream, t.rows());
                }
            }
            // Let the evictor catch up, then check every row it kept is whole and findable.
            long streamed = System.nanoTime();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (t.rows() > config.eviction().trigger() && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            TableStats stats = settled(t);
            assertTrue(stats.rows() <= config.eviction().trigger(), stats.toString());
            assertTrue(stats.evictedCapacity() > 0);
            assertEquals(0, stats.evictedTtl());
            assertEquals(stats.admitted() - stats.evictedCapacity(), stats.rows(), stats.toString());
            assertEquals(stream, stats.admitted() + stats.rejected(), "every new id was stored or refused");
            assertEquals(stats.rejected(), stats.refusedFull());
            // Memory: no more than a table that never evicts holding 1.2x the capacity (slots are
            // reused; a shard may peak above its average share).
            long bound;
            try (ParameterServer plain = ParameterServer.create(PsConfig.defaults())) {
                SparseTable p = plain.createTable(TableConfig.of("plain", D, Optimizer.sgd(0.5))
                        .withMaxRows(2L * capacity));
                for (long from = 0; from < capacity * 6L / 5; from += batch) {
                    for (int i = 0; i < batch; i++) {
                        ids[i] = (from + i) * 0x9E3779B97F4A7C15L;
                    }
                    p.apply(ids, 0, batch, MemorySegment.ofArray(g));
                }
                bound = p.stats().reservedBytes();
            }
            assertTrue(stats.reservedBytes() <= bound, stats.reservedBytes() + " bytes > " + bound);
            long found = 0;
            for (long i = 0; i < stream; i++) {
                byte[] row = t.rawRow(i * 0x9E3779B97F4A7C15L);
                if (row != null) {
                    found++;
                    assertEquals(i * 0x9E3779B97F4A7C15L, MemorySegment.ofArray(row).get(RowLayout.LONG, 0));
                }
            }
            assertEquals(stats.rows(), found);
            System.out.printf("capacity %,d, %,d ids in %.1f s (then %.1f s to check): at most %,d rows; %s%n",
                    capacity, stream, (streamed - start) / 1e9, (System.nanoTime() - streamed) / 1e9, maxRows, stats);
        }
    }

    @Test
    void settingsAreChecked() {
        TableConfig base = TableConfig.of("x", D, Optimizer.sgd(1));
        assertThrows(PsException.class, () -> base.evictAfter(Duration.ZERO));
        assertThrows(PsException.class, () -> base.evictAfter(Duration.ofSeconds(-1)));
        assertThrows(PsException.class, () -> base.capacity(0, EvictionPolicy.LEAST_FREQUENTLY_USED, 0.1));
        assertThrows(PsException.class, () -> base.capacity(10, EvictionPolicy.LEAST_FREQUENTLY_USED, 0.6));
        assertThrows(PsException.class, () -> base.capacity(10, EvictionPolicy.LEAST_FREQUENTLY_USED, Double.NaN));
        PsException e = assertThrows(PsException.class,
                () -> base.withEviction(new Eviction(0, 2_000_000, EvictionPolicy.LEAST_RECENTLY_UPDATED, 0)));
        assertEquals(PsException.Code.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("exceeds maxRows"), e.getMessage());
        TableConfig both = base.withMaxRows(100).capacity(5_000, EvictionPolicy.LEAST_FREQUENTLY_USED, 0.2)
                .evictAfter(Duration.ofMinutes(5));
        assertEquals(5_000, both.maxRows(), "a capacity raises maxRows");
        assertEquals(new Eviction(300_000_000_000L, 5_000, EvictionPolicy.LEAST_FREQUENTLY_USED, 0.2), both.eviction());
        assertEquals(4_000, both.eviction().target());
        assertEquals(4_500, both.eviction().trigger());
        assertEquals(Eviction.none(), base.eviction());
        // Serving tables delete nothing: no evictor.
        SparseTable serving = new SparseTable(both, PsConfig.defaults(), true);
        try {
            assertNull(serving.evictor());
        } finally {
            serving.close();
        }
    }

    @Test
    void evictionTravelsInCreateTableAndAnOlderBodyMeansNone() {
        TableConfig[] configs = {TableConfig.of("a", D, Optimizer.sgd(1)),
            TableConfig.of("b", D, Optimizer.sgd(1)).evictAfter(Duration.ofMinutes(90)).admitAfter(4),
            TableConfig.of("c", D, Optimizer.adam(0.1)).capacity(123_456, EvictionPolicy.LEAST_FREQUENTLY_USED, 0.25)
                    .withPullFormat(PullFormat.INT8),
            TableConfig.of("d", D, Optimizer.sgd(1)).capacity(7, EvictionPolicy.LEAST_RECENTLY_UPDATED, 0)
                    .evictAfter(Duration.ofNanos(3))};
        for (TableConfig c : configs) {
            byte[] name = dev.ferry.ps.net.PsDescriptor.nameBytes(c.name());
            byte[] body = new byte[dev.ferry.ps.net.PsDescriptor.createBytes(name.length)];
            dev.ferry.ps.net.PsDescriptor.writeCreate(MemorySegment.ofArray(body), name, c);
            assertEquals(c, dev.ferry.ps.net.PsDescriptor.readTable(MemorySegment.ofArray(body)));
            byte[] older = java.util.Arrays.copyOf(body, body.length - dev.ferry.ps.net.PsDescriptor.EVICTION_EXTENSION);
            TableConfig read = dev.ferry.ps.net.PsDescriptor.readTable(MemorySegment.ofArray(older));
            assertEquals(c.withEviction(Eviction.none()), read, "an older client's body: no eviction");
            if (c.eviction().enabled()) {
                PsException e = assertThrows(PsException.class,
                        () -> dev.ferry.ps.net.PsDescriptor.writeCreate(MemorySegment.ofArray(older), name, c));
                assertEquals(PsException.Code.INVALID_ARGUMENT, e.code());
            }
            body[body.length - 16] = 2; // the policy: unknown
            PsException e = assertThrows(PsException.class,
                    () -> dev.ferry.ps.net.PsDescriptor.readTable(MemorySegment.ofArray(body)));
            assertTrue(e.getMessage().contains("unknown eviction policy"), e.getMessage());
        }
    }

    /** The table's figures once they stop changing (the evictor thread may be mid-pass). */
    static TableStats settled(SparseTable t) {
        TableStats before = t.stats();
        while (true) {
            java.util.concurrent.locks.LockSupport.parkNanos(50_000_000L);
            TableStats now = t.stats();
            if (now.equals(before)) {
                return now;
            }
            before = now;
        }
    }

    /** The ids a table stores among {@code universe}, sorted. */
    static List<Long> stored(SparseTable t, Set<Long> universe) {
        List<Long> ids = new ArrayList<>();
        for (long id : universe) {
            if (t.rawRow(id) != null) {
                ids.add(id);
            }
        }
        ids.sort(Comparator.naturalOrder());
        return ids;
    }

    static Set<Long> universe(long n) {
        Set<Long> all = new HashSet<>();
        for (long i = 0; i < n; i++) {
            all.add(i);
        }
        return all;
    }
}
