package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.TableConfig;
import org.junit.jupiter.api.Test;

/**
 * A push's plan is used again once the push has succeeded ({@link PlanPool}): pushes of every
 * shape from several threads, many in flight at once, leave exactly the values the same pushes
 * leave in a local server (a plan given back while a push still read it would send another
 * push's ids); a push that failed keeps its plan out of the pool; and a push allocates far less
 * than a plan of its size.
 */
class PushPlanReuseTest extends PsNetTestBase {

    private static final int SERVERS = 2;
    private static final int DIMENSION = 4;
    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    private static TableConfig table(String name) {
        // SGD with learning rate 1 from zeros: a row is minus the sum of its gradients, exact for
        // small whole numbers whatever the order of the pushes.
        return TableConfig.of(name, DIMENSION, Optimizer.sgd(1)).withInitializer(Initializer.zeros());
    }

    @Test
    void concurrentPushesOfEveryShapeLeaveTheLocalServersValues() throws Exception {
        Cluster c = cluster("local", SERVERS, PsConfig.defaults(), null);
        c.client().createTable(table("emb"));
        int threads = 4;
        int pushes = 60;
        int inFlight = 6;
        long range = 5_000;
        List<long[]> allIds = new ArrayList<>();
        List<float[]> allGradients = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            SplittableRandom random = new SplittableRandom(t);
            for (int i = 0; i < pushes; i++) {
                int n = switch (i % 5) {
                    case 0 -> 3_000 + random.nextInt(1_200); // grows the plans
                    case 1 -> 1;
                    case 2 -> 40; // all duplicates, below
                    default -> 1 + random.nextInt(700);
                };
                long[] ids = new long[n];
                float[] gradients = new float[n * DIMENSION];
                for (int k = 0; k < n; k++) {
                    ids[k] = i % 5 == 2 ? 7 : random.nextLong(range);
                }
                for (int k = 0; k < gradients.length; k++) {
                    gradients[k] = random.nextInt(-3, 4);
                }
                allIds.add(ids);
                allGradients.add(gradients);
            }
        }
        List<Thread> pushers = new ArrayList<>();
        List<Throwable> failures = new java.util.concurrent.CopyOnWriteArrayList<>();
        for (int t = 0; t < threads; t++) {
            int first = t * pushes;
            pushers.add(Thread.ofPlatform().start(() -> {
                try {
                    List<CompletableFuture<Void>> out = new ArrayList<>();
                    for (int i = first; i < first + pushes; i++) {
                        out.add(c.client().pushAsync("emb", allIds.get(i), allGradients.get(i)));
                        if (out.size() == inFlight) {
                            out.removeFirst().get(30, TimeUnit.SECONDS);
                        }
                    }
                    for (CompletableFuture<Void> f : out) {
                        f.get(30, TimeUnit.SECONDS);
                    }
                } catch (Throwable e) {
                    failures.add(e);
                }
            }));
        }
        for (Thread t : pushers) {
            t.join();
        }
        assertTrue(failures.isEmpty(), "a push failed: " + (failures.isEmpty() ? "" : failures.getFirst()));
        assertTrue(c.client().idlePushPlans() >= 1 && c.client().idlePushPlans() <= threads * inFlight,
                "idle plans after the pushes: " + c.client().idlePushPlans());
        try (ParameterServer local = ParameterServer.create(PsConfig.defaults())) {
            local.createTable(table("emb"));
            for (int i = 0; i < allIds.size(); i++) {
                long[] ids = allIds.get(i);
                local.push("emb", DIMENSION, ids, 0, ids.length, MemorySegment.ofArray(allGradients.get(i)));
            }
            long[] every = new long[(int) range];
            for (int i = 0; i < every.length; i++) {
                every[i] = i;
            }
            float[] remote = new float[every.length * DIMENSION];
            float[] expected = new float[every.length * DIMENSION];
            c.client().pull("emb", every, 0, every.length, remote);
            local.pull("emb", DIMENSION, every, 0, every.length, MemorySegment.ofArray(expected));
            for (int i = 0; i < expected.length; i++) {
                assertEquals(expected[i], remote[i], "id " + i / DIMENSION + ", element " + i % DIMENSION);
            }
        }
    }

    @Test
    void aFailedPushKeepsItsPlanAndTheNextPushIsRight() throws Exception {
        Cluster c = cluster("local", SERVERS, PsConfig.defaults(), null);
        // Room for 40 rows per server: a push of 200 new ids fills it and a part is refused.
        c.client().createTable(table("small").withMaxRows(40));
        long[] few = {1, 2, 3};
        float[] ones = new float[few.length * DIMENSION];
        java.util.Arrays.fill(ones, 1);
        c.client().push("small", few, ones);
        assertEquals(1, c.client().idlePushPlans(), "a push that succeeded gives its plan back");
        long[] many = new long[200];
        for (int i = 0; i < many.length; i++) {
            many[i] = 1_000 + i;
        }
        ExecutionException refused = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                () -> c.client().pushAsync("small", many, new float[many.length * DIMENSION]).get(30, TimeUnit.SECONDS));
        assertTrue(refused.getCause() instanceof PsException p && p.code() == PsException.Code.TABLE_FULL,
                "refused with: " + refused.getCause());
        assertEquals(0, c.client().idlePushPlans(), "the failed push's plan came back to the pool");
        c.client().push("small", few, ones);
        assertEquals(1, c.client().idlePushPlans());
        float[] out = new float[few.length * DIMENSION];
        c.client().pull("small", few, 0, few.length, out);
        for (float v : out) {
            assertEquals(-2f, v, "two pushes of 1 at learning rate 1");
        }
    }

    @Test
    void aPushAllocatesFarLessThanAPlanOfItsSize() throws Exception {
        Cluster c = cluster("local", SERVERS, PsConfig.defaults(), null);
        c.client().createTable(table("emb"));
        int n = 4_096;
        long[] ids = new long[n];
        float[] gradients = new float[n * DIMENSION];
        SplittableRandom random = new SplittableRandom(3);
        for (int i = 0; i < n; i++) {
            ids[i] = random.nextLong(1 << 20);
        }
        // The servers' optimizer allocates until the JIT has compiled its vector kernels: the
        // figure is the least of up to 30 rounds of 100 pushes, after 300 pushes of warm-up.
        int pushes = 100;
        for (int i = 0; i < 3 * pushes; i++) {
            c.client().push("emb", ids, gradients);
        }
        double perPush = Double.MAX_VALUE;
        for (int round = 0; round < 30 && perPush >= 8 * 1024; round++) {
            long before = THREADS.getTotalThreadAllocatedBytes();
            for (int i = 0; i < pushes; i++) {
                c.client().push("emb", ids, gradients);
            }
            perPush = Math.min(perPush, (THREADS.getTotalThreadAllocatedBytes() - before) / (double) pushes);
        }
        // A plan of 4,096 ids holds about 220 KB of arrays; planning each push afresh allocated that.
        System.out.printf(java.util.Locale.ROOT, "push of %d ids: %.0f B allocated per push over all threads%n", n, perPush);
        assertTrue(perPush < 32 * 1024, perPush + " B allocated per push of " + n + " ids");
        assertEquals(1, c.client().idlePushPlans());
    }
}
