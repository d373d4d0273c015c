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
                    int word = (int) doorbell.arm();
                    armed.countDown();
                    doorbell.await(word, Doorbell.PROGRESS, TimeUnit.SECONDS.toNanos(20));
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
            int word = (int) doorbell.arm();
            remote.ring(); // between the sleeper's last poll and its wait
            long start = System.nanoTime();
            doorbell.await(word, Doorbell.PROGRESS, TimeUnit.SECONDS.toNanos(20));
            doorbell.disarm();
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(10), "the ring was lost");
        }
    }

    @Test
    void aRingWakesASleepingCallerBeforeTheProgressThreadAndAWakeByBitOnlyItsOwner() throws Exception {
        try (Doorbell doorbell = create(); Doorbell.Remote remote = Doorbell.open(doorbell.path())) {
            assertTrue((doorbell.arm() & Doorbell.ARMED_HERE) != 0, "the first arm arms");
            assertTrue((doorbell.arm() & Doorbell.ARMED_HERE) == 0, "an armed word is not armed again");
            // Each sleeper sleeps again after any wake-up until it is let go: one woken by
            // mistake sleeps on, and the one meant stays asleep, so its get() times out.
            Sleeper progress = new Sleeper(doorbell, Doorbell.PROGRESS);
            Thread.sleep(20); // the progress thread sleeps first: without the callers' bits a ring would wake it
            Sleeper first = new Sleeper(doorbell, 1);
            Sleeper second = new Sleeper(doorbell, 2);
            Thread.sleep(20);
            second.go = true;
            doorbell.wake(2); // the second caller's answer came
            second.done.get(10, TimeUnit.SECONDS);
            assertFalse(first.done.isDone() || progress.done.isDone(), "a wake by bit wakes its owner only");
            assertTrue(doorbell.armed(), "a wake by bit leaves the word armed");
            first.go = true;
            remote.ring();
            first.done.get(10, TimeUnit.SECONDS);
            assertFalse(progress.done.isDone());
            assertFalse(doorbell.armed(), "a ring disarms");
            assertTrue((doorbell.arm() & Doorbell.ARMED_HERE) != 0, "the one woken arms again");
            progress.go = true;
            remote.ring(); // no caller asleep: the progress thread
            progress.done.get(10, TimeUnit.SECONDS);
        }
    }

    /** A thread asleep on the doorbell as the waiter of a bit (a caller's, or the progress thread's) until let go. */
    private static final class Sleeper {

        final CompletableFuture<Void> done = new CompletableFuture<>();
        volatile boolean go;

        Sleeper(Doorbell doorbell, int bit) {
            Thread.ofPlatform().daemon().start(() -> {
                while (!go) {
                    int word = (int) doorbell.arm();
                    if (bit != Doorbell.PROGRESS) {
                        doorbell.asleep(bit);
                    }
                    if (!go) {
                        doorbell.await(word, bit, TimeUnit.SECONDS.toNanos(20));
                    }
                    if (bit != Doorbell.PROGRESS) {
                        doorbell.awake(bit);
                    }
                }
                done.complete(null);
            });
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
