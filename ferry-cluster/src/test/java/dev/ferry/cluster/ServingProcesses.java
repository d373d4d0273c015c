package dev.ferry.cluster;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferry.ps.net.ChildJvm;
import dev.ferry.ps.net.PsClient;
import dev.ferry.rpc.RpcConfig;

/**
 * What the export's kill tests share: a serving member process that follows a training cluster,
 * a background trainer pushing unique integer SGD gradients into table "emb", and the wait until
 * the serving cluster serves exactly training's rows.
 */
final class ServingProcesses {

    private ServingProcesses() {
    }

    /** Starts member "sv" of {@code serve} as a child JVM following {@code train} every 200 ms (tcp). */
    static ChildJvm startServing(ClusterConfig serve, ClusterConfig train, List<ChildJvm> children) {
        return Members.startProcess(serve, "sv", "-Xmx256m", ExportOptions.following(train.uri(), 200).toArgs(), children);
    }

    /**
     * Pushes batches of 32 rows of {@code span} consecutive ids into "emb" on a thread of its own,
     * each element a unique integer (so every sum is exact), until closed; stops at the first
     * failed push, which {@link #stop} then throws.
     */
    static final class Trainer implements AutoCloseable {

        private final AtomicBoolean stop = new AtomicBoolean();
        private final AtomicInteger pushes = new AtomicInteger();
        private final AtomicReference<Throwable> failed = new AtomicReference<>();
        private final Thread thread;

        Trainer(PsClient trainer, int span, int dimension) {
            thread = Thread.ofPlatform().name("export-test-trainer").start(() -> {
                long[] batch = new long[32];
                float[] grads = new float[32 * dimension];
                int k = 1;
                while (!stop.get()) {
                    int base = (k * 32) % span;
                    for (int i = 0; i < 32; i++) {
                        batch[i] = base + i;
                        Arrays.fill(grads, i * dimension, (i + 1) * dimension, k++ % 4093 + 1);
                    }
                    try {
                        trainer.push("emb", batch, grads);
                        pushes.incrementAndGet();
                    } catch (RuntimeException e) {
                        failed.set(e);
                        return;
                    }
                }
            });
        }

        /** Pushes acknowledged so far. */
        int pushes() {
            return pushes.get();
        }

        /** Stops and joins the thread; throws if a push failed. */
        void stop() {
            stop.set(true);
            try {
                thread.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted while stopping the trainer", e);
            }
            Throwable f = failed.get();
            if (f != null) {
                throw new AssertionError("a push failed: " + f, f);
            }
        }

        /** {@link #stop}, for a test that ends early. */
        @Override
        public void close() {
            stop();
        }
    }

    /** Waits (60 s at most) until the servers at {@code addresses} serve exactly {@code expected} for "emb". */
    static void awaitEqual(RpcConfig rpc, String addresses, long[] ids, float[] expected, int dimension) {
        try (PsClient reader = PsClient.connect(rpc, Members.transport("tcp"), addresses)) {
            String[] last = {"nothing pulled"};
            try {
                Members.await60(() -> {
                    try {
                        float[] got = reader.pull("emb", ids);
                        for (int i = 0; i < got.length; i++) {
                            if (got[i] != expected[i]) {
                                last[0] = "id " + i / dimension + ": " + got[i] + " != " + expected[i];
                                return false;
                            }
                        }
                        return true;
                    } catch (RuntimeException notYet) {
                        last[0] = notYet.toString();
                        return false;
                    }
                }, "the serving cluster equal to training");
            } catch (AssertionError e) {
                throw new AssertionError(e.getMessage() + "; last: " + last[0], e);
            }
        }
    }
}
