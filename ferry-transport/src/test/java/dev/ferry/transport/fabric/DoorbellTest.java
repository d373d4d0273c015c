package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The shared-memory doorbell: a ring wakes an armed sleeper, and only doorbell files are mapped. */
@Timeout(30)
class DoorbellTest {

    private static Doorbell create() {
        Doorbell doorbell = Doorbell.create();
        Assumptions.assumeTrue(doorbell != null, "no /dev/shm or futex here");
        return doorbell;
    }

    @Test
    void aRingWakesAnArmedSleeperLongBeforeItsTimeout() throws Exception {
        try (Doorbell doorbell = create(); Doorbell.Remote remote = Doorbell.open(doorbell.path())) {
            assertNotNull(remote, "a doorbell of this host opens");
            for (int round = 0; round < 20; round++) {
                CompletableFuture<Long> slept = new CompletableFuture<>();
                java.util.concurrent.CountDownLatch armed = new java.util.concurrent.CountDownLatch(1);
                Thread sleeper = Thread.ofPlatform().start(() -> {
                    long start = System.nanoTime();
                    doorbell.arm();
                    armed.countDown();
                    doorbell.await(TimeUnit.SECONDS.toNanos(20));
                    doorbell.disarm();
                    slept.complete(System.nanoTime() - start);
                });
                // A ring before arm() is not this test's case (the progress thread polls after arming):
                // ring only once the sleeper has armed, however late a loaded machine schedules it.
                assertTrue(armed.await(10, TimeUnit.SECONDS), "the sleeper armed");
                Thread.sleep(5);
                remote.ring();
                long nanos = slept.get(10, TimeUnit.SECONDS);
                sleeper.join();
                assertTrue(nanos < TimeUnit.SECONDS.toNanos(10), "round " + round + ": slept " + nanos / 1_000_000 + " ms");
            }
        }
    }

    @Test
    void aRingBeforeTheWaitIsNotLost() {
        try (Doorbell doorbell = create(); Doorbell.Remote remote = Doorbell.open(doorbell.path())) {
            doorbell.arm();
            remote.ring(); // between the sleeper's last poll and its wait
            long start = System.nanoTime();
            doorbell.await(TimeUnit.SECONDS.toNanos(20));
            doorbell.disarm();
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(10), "the ring was lost");
        }
    }

    @Test
    void onlyDoorbellFilesInDevShmAreMapped() throws Exception {
        try (Doorbell doorbell = create()) {
            String path = doorbell.path();
            String name = Path.of(path).getFileName().toString();
            assertNull(Doorbell.open(""));
            assertNull(Doorbell.open("/etc/passwd"));
            assertNull(Doorbell.open("/dev/shm/../etc/" + name));
            assertNull(Doorbell.open("/tmp/" + name));
            Path wrongSize = Files.createTempFile(Path.of("/dev/shm"), "ferry-doorbell-" + ProcessHandle.current().pid()
                    + "-", "");
            try {
                assertNull(Doorbell.open(wrongSize.toString()), "a file of another size is not a doorbell");
                assertTrue(Files.size(wrongSize) == 0, "and is not grown");
            } finally {
                Files.deleteIfExists(wrongSize);
            }
        }
    }

    @Test
    void closeDeletesTheFileAndLeftoversOfDeadProcessesGo() throws Exception {
        Doorbell doorbell = create();
        Path own = Path.of(doorbell.path());
        assertTrue(Files.exists(own));
        doorbell.close();
        assertFalse(Files.exists(own), "close deletes the doorbell file");

        // A process id no process can have: Linux ids stop at 2^22.
        long dead = Integer.MAX_VALUE;
        Path leftover = Path.of("/dev/shm", "ferry-doorbell-" + dead + "-0");
        Files.write(leftover, new byte[64]);
        try (Doorbell next = create()) {
            assertFalse(Files.exists(leftover), "a dead process's doorbell is removed");
            assertTrue(Files.exists(Path.of(next.path())));
        } finally {
            Files.deleteIfExists(leftover);
        }
    }
}
