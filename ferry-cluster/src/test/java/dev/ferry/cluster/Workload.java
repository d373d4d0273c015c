package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import dev.ferry.ps.net.PsClient;

/**
 * A continuous SGD workload (learning rate 1, zero rows): pushers send batches whose gradient is
 * a unique integer per push, a puller reads every row. The oracle keeps, per id, the exact sum of
 * the acknowledged pushes; after the workload stops each row must equal it.
 */
final class Workload implements AutoCloseable {

    static final int DIM = 2;

    private final PsClient client;
    private final String table;
    private final int keys;
    private final double[] acked;
    private final AtomicInteger nextGradient = new AtomicInteger(1);
    private final AtomicBoolean stop = new AtomicBoolean();
    private final AtomicLong pushes = new AtomicLong();
    private final AtomicLong pulls = new AtomicLong();
    private final ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
    private final ExecutorService pool;
    private final List<Future<?>> workers = new ArrayList<>();

    Workload(PsClient client, String table, int keys, int pushers) {
        this.client = client;
        this.table = table;
        this.keys = keys;
        this.acked = new double[keys];
        this.pool = Executors.newFixedThreadPool(pushers + 1);
        for (int w = 0; w < pushers; w++) {
            long seed = w;
            workers.add(pool.submit(() -> push(seed)));
        }
        workers.add(pool.submit(this::pull));
    }

    private void push(long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        while (!stop.get()) {
            long[] batch = new long[8];
            for (int i = 0; i < batch.length; i++) {
                batch[i] = random.nextInt(keys);
            }
            int k = nextGradient.getAndIncrement();
            float[] grads = new float[batch.length * DIM];
            java.util.Arrays.fill(grads, -k);
            try {
                client.push(table, batch, grads);
            } catch (RuntimeException e) {
                failures.add(e);
                return;
            }
            synchronized (acked) {
                for (long id : batch) {
                    acked[(int) id] += k;
                }
            }
            pushes.incrementAndGet();
        }
    }

    private void pull() {
        long[] all = allIds();
        while (!stop.get()) {
            try {
                client.pull(table, all);
                pulls.incrementAndGet();
            } catch (RuntimeException e) {
                failures.add(e);
                return;
            }
        }
    }

    long[] allIds() {
        long[] all = new long[keys];
        for (int i = 0; i < keys; i++) {
            all[i] = i;
        }
        return all;
    }

    /** Waits until {@code n} more pushes were acknowledged. */
    void awaitPushes(long n) {
        long target = pushes.get() + n;
        Members.await(() -> pushes.get() >= target || !failures.isEmpty(), n + " more pushes");
        assertTrue(failures.isEmpty(), () -> "the workload failed: " + failures);
    }

    long pushes() {
        return pushes.get();
    }

    /** Stops, then checks every row against the acknowledged pushes. */
    void stopAndCheck() throws Exception {
        stop();
        assertTrue(failures.isEmpty(), () -> "the workload failed: " + failures);
        float[] rows = client.pull(table, allIds());
        for (int i = 0; i < keys; i++) {
            for (int j = 0; j < DIM; j++) {
                assertEquals((float) acked[i], rows[i * DIM + j], "id " + i + " after " + pushes.get() + " pushes");
            }
        }
    }

    void stop() throws Exception {
        stop.set(true);
        for (Future<?> f : workers) {
            f.get(60, TimeUnit.SECONDS);
        }
        pool.shutdown();
    }

    @Override
    public void close() {
        stop.set(true);
        pool.shutdownNow();
    }
}
