package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.locks.ReentrantLock;

import dev.ferry.ps.net.PsDescriptor;
import org.junit.jupiter.api.Test;

/**
 * Admission: ids not admitted get the initializer's values and no row, pushes to them count and
 * are dropped; {@code admitAfter(n)} is checked against an exact count under a Zipf workload.
 */
class AdmissionTest {

    private static final int D = 4;

    private static float[] pull(SparseTable t, long... ids) {
        float[] out = new float[ids.length * D];
        t.gather(ids, 0, ids.length, MemorySegment.ofArray(out));
        return out;
    }

    private static void push(SparseTable t, long[] ids, float[] grads) {
        t.apply(ids, 0, ids.length, MemorySegment.ofArray(grads));
    }

    private static float[] initial(long id) {
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            SparseTable t = ps.createTable(config("ref", Admission.always()));
            return pull(t, id);
        }
    }

    private static TableConfig config(String name, Admission admission) {
        return TableConfig.of(name, D, Optimizer.sgd(1)).withInitializer(Initializer.uniform(-1, 1, 3))
                .withAdmission(admission);
    }

    @Test
    void idsBelowTheCountAreAnsweredButNotStoredAndTheAdmittingSightingStores() {
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            SparseTable t = ps.createTable(config("t", Admission.after(3)));
            float[] init5 = initial(5);
            org.junit.jupiter.api.Assertions.assertArrayEquals(init5, pull(t, 5), "a pull of an id not admitted");
            push(t, new long[] {5}, new float[] {1, 1, 1, 1});
            assertEquals(0, t.rows(), "a push to an id not admitted is dropped");
            assertNull(t.rawRow(5));
            org.junit.jupiter.api.Assertions.assertArrayEquals(init5, pull(t, 5), "the third sighting stores the row");
            assertEquals(1, t.rows());
            assertNotNull(t.rawRow(5));
            // A push that admits applies its step; the pushes before it were dropped.
            float[] init6 = initial(6);
            pull(t, 6);
            push(t, new long[] {6}, new float[] {9, 9, 9, 9});
            push(t, new long[] {6}, new float[] {1, 2, 3, 4});
            float[] six = pull(t, 6);
            for (int j = 0; j < D; j++) {
                assertEquals(init6[j] - (j + 1), six[j], 1e-6, "element " + j);
            }
            // Duplicates in one batch count one sighting each.
            float[] twice = pull(t, 7, 7, 7);
            assertEquals(3, t.rows());
            org.junit.jupiter.api.Assertions.assertArrayEquals(initial(7), java.util.Arrays.copyOfRange(twice, 8, 12));
            SparseTable.AdmissionStats stats = t.admissionStats();
            assertEquals(3, stats.admitted());
            assertEquals(6, stats.rejected(), "5: pull, push; 6: pull, push; 7: two pulls");
            assertEquals(Admission.After.DEFAULT_CELLS, stats.filterBytes());
        }
    }

    /**
     * 300,000 sightings (pulls and pushes in batches of 200) of ids drawn from a Zipf law
     * (exponent 1.05 over 200,000 ids). A count-min filter never under-counts before its first
     * halving, so every id seen 3 times or more must be stored; it over-counts only when all four
     * cells of an id are raised by others, so the test allows at most 0.5% of the ids seen once or
     * twice to be stored, and prints how many were.
     */
    @Test
    void admitAfterThreeUnderZipfStoresExactlyTheIdsSeenThreeTimes() {
        int cells = 1 << 20;
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            SparseTable t = ps.createTable(config("zipf", Admission.after(3, cells)));
            Zipf zipf = new Zipf(200_000, 1.05, 42);
            Map<Long, Integer> seen = new HashMap<>();
            int batch = 200;
            long[] ids = new long[batch];
            float[] grads = new float[batch * D];
            SplittableRandom random = new SplittableRandom(7);
            for (int b = 0; b < 1_500; b++) {
                for (int i = 0; i < batch; i++) {
                    ids[i] = zipf.nextId();
                    seen.merge(ids[i], 1, Integer::sum);
                }
                if (random.nextBoolean()) {
                    pull(t, ids);
                } else {
                    push(t, ids, grads);
                }
            }
            for (int s = 0; s < t.shardCount(); s++) {
                assertEquals(0, ((AdmissionGate.CountMin) t.gate(s)).halvings(), "the stream is shorter than a halving");
            }
            int atLeast3 = 0;
            int fewer = 0;
            int falseAdmits = 0;
            for (Map.Entry<Long, Integer> e : seen.entrySet()) {
                boolean stored = t.rawRow(e.getKey()) != null;
                if (e.getValue() >= 3) {
                    atLeast3++;
                    assertTrue(stored, "id " + e.getKey() + " seen " + e.getValue() + " times is not stored");
                } else {
                    fewer++;
                    falseAdmits += stored ? 1 : 0;
                }
            }
            System.out.printf("admitAfter(3), Zipf: %d distinct ids, %d seen >= 3 times (all stored), %d seen fewer "
                    + "of which %d stored by over-counting; filter %d bytes%n", seen.size(), atLeast3, fewer,
                    falseAdmits, t.admissionStats().filterBytes());
            assertEquals(atLeast3 + falseAdmits, t.rows());
            assertTrue(falseAdmits <= fewer / 200, falseAdmits + " of " + fewer + " ids seen once or twice were stored");
            assertEquals(cells, t.admissionStats().filterBytes(), "the filter's memory is its bound");
            assertEquals(t.rows(), t.admissionStats().admitted());
        }
    }

    @Test
    void theFilterForgetsByHalving() {
        ReentrantLock lock = new ReentrantLock();
        AdmissionGate.CountMin gate = new AdmissionGate.CountMin(lock, 3, 1024);
        lock.lock();
        try {
            assertFalse(gate.admit(1));
            assertFalse(gate.admit(1));
            assertEquals(2, gate.estimate(1));
            // 2 x 1024 sightings halve every cell; the other id's cells do not touch id 1's here.
            for (int i = 0; i < 2 * 1024 - 2; i++) {
                gate.admit(2);
            }
            assertEquals(1, gate.halvings());
            assertEquals(1, gate.estimate(1), "halved from 2");
            assertFalse(gate.admit(1), "2 after the halving");
            assertTrue(gate.admit(1), "3");
        } finally {
            lock.unlock();
        }
    }

    @Test
    void admitProbabilityStoresThatShareOfNewIds() {
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            SparseTable t = ps.createTable(config("p", Admission.probability(0.25)));
            int n = 20_000;
            long[] ids = new long[n];
            for (int i = 0; i < n; i++) {
                ids[i] = Slots.mix(i);
            }
            float[] got = pull(t, ids);
            // Binomial(20000, 0.25): mean 5000, sd 61; 6 sd either side.
            assertTrue(Math.abs(t.rows() - 5000) < 370, t.rows() + " rows stored");
            assertEquals(n - t.rows(), t.admissionStats().rejected());
            assertEquals(0, t.admissionStats().filterBytes());
            float[] reference;
            try (ParameterServer other = ParameterServer.create(PsConfig.defaults())) {
                reference = pull(other.createTable(config("ref", Admission.always())), ids);
            }
            org.junit.jupiter.api.Assertions.assertArrayEquals(reference, got, "admitted or not, a pull answers the initial values");
        }
    }

    @Test
    void theRuleTravelsInCreateTableAndAnOldBodyMeansAlways() {
        for (TableConfig c : new TableConfig[] {config("a", Admission.always()), config("b", Admission.after(7, 1 << 12)),
            config("c", Admission.probability(0.125)), config("d", Admission.after(255, 1 << 30))
                    .withPullFormat(PullFormat.BF16)}) {
            byte[] name = PsDescriptor.nameBytes(c.name());
            byte[] body = new byte[PsDescriptor.createBytes(name.length)];
            PsDescriptor.writeCreate(MemorySegment.ofArray(body), name, c);
            assertEquals(c, PsDescriptor.readTable(MemorySegment.ofArray(body)));
            byte[] old = java.util.Arrays.copyOf(body, body.length - PsDescriptor.CREATE_EXTENSION
                    - PsDescriptor.EVICTION_EXTENSION);
            TableConfig read = PsDescriptor.readTable(MemorySegment.ofArray(old));
            assertEquals(Admission.always(), read.admission());
            assertEquals(PullFormat.F32, read.pullFormat());
        }
        assertThrows(PsException.class, () -> Admission.after(0));
        assertThrows(PsException.class, () -> Admission.after(3, 1000));
        assertThrows(PsException.class, () -> Admission.probability(0));
        assertThrows(PsException.class, () -> Admission.probability(Double.NaN));
    }

    /** Ids drawn from a Zipf law over {@code n} ranks, each rank a fixed random-looking id. */
    static final class Zipf {
        private final double[] cdf;
        private final SplittableRandom random;

        Zipf(int n, double exponent, long seed) {
            cdf = new double[n];
            double sum = 0;
            for (int k = 0; k < n; k++) {
                sum += 1 / Math.pow(k + 1, exponent);
                cdf[k] = sum;
            }
            for (int k = 0; k < n; k++) {
                cdf[k] /= sum;
            }
            random = new SplittableRandom(seed);
        }

        long nextId() {
            int k = java.util.Arrays.binarySearch(cdf, random.nextDouble());
            int rank = k >= 0 ? k : Math.min(cdf.length - 1, -k - 1);
            return Slots.mix(rank * 0x9E3779B97F4A7C15L + 1);
        }
    }
}
