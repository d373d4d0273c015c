package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.TableConfig;
import dev.ferry.transport.TransportConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A steady mixed load on shm while the JVMs trap all the time: two servers in child JVMs forced
 * into a safepoint every millisecond (each armed poll is a SIGSEGV the JVM handles), this JVM
 * collecting garbage and taking implicit null checks. No JVM's routine signal may cost a
 * process its shm region (libfabric's shm handler unlinked them): afterwards, and every few
 * seconds during the load, a new client connects at once; at the end {@code /dev/shm} holds
 * exactly one region per live transport of these processes, and nothing of them once they stopped.
 *
 * <p>{@code -Dferry.ps.shmLoad.seconds} sets the length of the load (20 s by default; the
 * {@code full} profile runs 600), {@code -Dferry.ps.shmLoad.probeSeconds} how often a new client
 * connects during it (5 s).
 */
class ShmLoadTest {

    private static final Path SHM = Path.of("/dev/shm");
    private static final long SECONDS = Long.getLong("ferry.ps.shmLoad.seconds",
            "full".equals(System.getProperty("ferry.test.scale", "ci")) ? 600 : 20);
    /** How often a new client connects during the load: {@code -Dferry.ps.shmLoad.probeSeconds}, 5 s by default. */
    private static final long PROBE_SECONDS = Long.getLong("ferry.ps.shmLoad.probeSeconds", 5);
    private static final List<String> JVM = List.of("-Xmx256m", "-XX:TieredStopAtLevel=1",
            "-XX:+UnlockDiagnosticVMOptions", "-XX:+SafepointALot", "-XX:GuaranteedSafepointInterval=1");
    private static final int DIMENSION = 8;

    @Test
    @Timeout(value = 900, unit = TimeUnit.SECONDS)
    void regionsSurviveRoutineSignalsAndNewClientsConnectAfterALongMixedLoad() throws Exception {
        long self = ProcessHandle.current().pid();
        long[] servers = new long[2];
        try (LocalCluster cluster = LocalCluster.start(2, "shm", null, JVM);
                PsClient client = PsClient.connect(cluster.rpcConfig(), small(cluster), cluster.addresses())) {
            servers[0] = cluster.pid(0);
            servers[1] = cluster.pid(1);
            client.createTable(TableConfig.of("emb", DIMENSION, Optimizer.sgd(0.01))
                    .withInitializer(Initializer.normal(0, 0.05, 3)));
            SplittableRandom random = new SplittableRandom(7);
            long start = System.nanoTime();
            long end = start + TimeUnit.SECONDS.toNanos(SECONDS);
            long nextProbe = start + TimeUnit.SECONDS.toNanos(PROBE_SECONDS);
            long nextProgress = start + TimeUnit.SECONDS.toNanos(60);
            long rounds = 0;
            long probes = 0;
            long nullChecks = 0;
            while (System.nanoTime() < end) {
                long[] ids = new long[1 + random.nextInt(256)];
                for (int i = 0; i < ids.length; i++) {
                    ids[i] = random.nextLong(1 << 20);
                }
                float[] grads = new float[ids.length * DIMENSION];
                for (int i = 0; i < grads.length; i++) {
                    grads[i] = (float) random.nextGaussian();
                }
                // Pushes and pulls in flight together, sync and async, to both servers.
                CompletableFuture<Void> push = client.pushAsync("emb", ids, grads);
                float[] rows = client.pull("emb", ids);
                assertEquals(ids.length * DIMENSION, rows.length);
                push.join();
                nullChecks += implicitNullChecks(rounds);
                if (rounds % 50 == 0) {
                    System.gc();
                    assertEquals(2, client.describeServers().size());
                }
                rounds++;
                long now = System.nanoTime();
                if (now >= nextProbe) {
                    assertNewClientConnects(cluster, "after " + TimeUnit.NANOSECONDS.toSeconds(now - start) + " s");
                    probes++;
                    nextProbe = now + TimeUnit.SECONDS.toNanos(PROBE_SECONDS);
                }
                if (now >= nextProgress) {
                    System.err.printf("shm load: %d s, %d rounds, %d new clients%n",
                            TimeUnit.NANOSECONDS.toSeconds(now - start), rounds, probes);
                    nextProgress = now + TimeUnit.SECONDS.toNanos(60);
                }
            }
            System.err.printf("shm load: %d s, %d rounds, %d new clients, %d null checks taken%n", SECONDS, rounds, probes,
                    nullChecks);
            assertNewClientConnects(cluster, "after the load");
            // One region per transport: each server's, this client's.
            for (long server : servers) {
                assertEquals(1, regionsOf(server).size(), "regions of server " + server + ": " + regionsOf(server));
            }
            assertEquals(1, regionsOf(self).size(), "regions of this JVM: " + regionsOf(self));
        }
        for (long server : servers) {
            assertTrue(ProcessHandle.of(server).map(h -> !h.isAlive()).orElse(true), "server " + server + " still runs");
            assertEquals(Set.of(), filesOf(server), "left by stopped server " + server);
        }
        assertEquals(Set.of(), filesOf(self), "left by this JVM's closed transports");
    }

    /** A client transport small enough to open several. */
    private static TransportConfig small(LocalCluster cluster) {
        return cluster.clientTransport().withPools(8L << 20, 8L << 20, 16L << 20).withConnectTimeoutMillis(10_000);
    }

    private static void assertNewClientConnects(LocalCluster cluster, String when) {
        try (PsClient fresh = PsClient.connect(cluster.rpcConfig(), small(cluster), cluster.addresses())) {
            assertEquals(DIMENSION * 2, fresh.pull("emb", new long[] {1, 2}).length, when);
        } catch (RuntimeException e) {
            throw new AssertionError("a new client cannot connect " + when + "; regions of the servers: "
                    + regionsOf(cluster.pid(0)) + " " + regionsOf(cluster.pid(1)), e);
        }
    }

    private static final class Holder {
        int[] values;
    }

    /** Reads through a reference that is null now and then: compiled, each null is a SIGSEGV the JVM turns into an NPE. */
    private static long implicitNullChecks(long round) {
        Holder[] holders = new Holder[64];
        for (int i = 0; i < holders.length; i++) {
            holders[i] = (i + round) % 7 == 0 ? null : new Holder();
            if (holders[i] != null) {
                holders[i].values = new int[] {i};
            }
        }
        long taken = 0;
        for (Holder h : holders) {
            try {
                taken -= h.values.length - 1;
            } catch (NullPointerException e) {
                taken++;
            }
        }
        return taken;
    }

    /** shm regions ({@code <pid>:<uid>:<n>}) of process {@code pid}. */
    static Set<String> regionsOf(long pid) {
        Set<String> regions = new TreeSet<>();
        for (String name : filesOf(pid)) {
            if (name.startsWith(pid + ":")) {
                regions.add(name);
            }
        }
        return regions;
    }

    /** Files in {@code /dev/shm} named after process {@code pid}: its shm regions and doorbells. */
    static Set<String> filesOf(long pid) {
        Set<String> found = new TreeSet<>();
        try (Stream<Path> files = Files.list(SHM)) {
            List<String> names = new ArrayList<>(files.map(p -> p.getFileName().toString()).toList());
            for (String name : names) {
                if (name.startsWith(pid + ":") || name.startsWith("ferry-doorbell-" + pid + "-")) {
                    found.add(name);
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return found;
    }
}
