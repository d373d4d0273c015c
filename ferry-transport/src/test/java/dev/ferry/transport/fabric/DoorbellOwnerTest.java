package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;

import dev.ferry.fabric.OwnerLock;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Doorbell leftovers are judged by their owner's lock, not by a process id that may name another
 * process (PID namespaces, reuse): a marked doorbell nobody holds goes even if its id is alive
 * here; a held one stays, even with the id of a process that does not exist here.
 */
@Timeout(30)
class DoorbellOwnerTest {

    @Test
    void aMarkedDoorbellGoesExactlyWhenItsOwnerNoLongerHoldsIt() throws Exception {
        Doorbell live = Doorbell.create();
        Assumptions.assumeTrue(live != null, "no /dev/shm or futex here");
        // Process 1 runs in every namespace: the id says "alive", the free lock says "dead".
        Path dead = Path.of("/dev/shm", "ferry-doorbell-1-" + Long.toHexString(System.nanoTime()));
        // An id no process can have (Linux ids stop at 2^22), held by this process: an owner in another namespace.
        Path elsewhere = Path.of("/dev/shm", "ferry-doorbell-" + Integer.MAX_VALUE + "-" + Long.toHexString(System.nanoTime()));
        OwnerLock holder = null;
        try {
            Files.write(dead, new byte[64]);
            Files.write(elsewhere, new byte[64]);
            OwnerLock released = OwnerLock.hold(dead, Doorbell.MARK);
            Assumptions.assumeTrue(released != null && OwnerLock.isMarked(dead, Doorbell.MARK),
                    "no flock or user extended attributes on /dev/shm");
            released.close();
            holder = OwnerLock.hold(elsewhere, Doorbell.MARK);
            try (Doorbell next = Doorbell.create()) {
                assertFalse(Files.exists(dead), "a marked doorbell that nobody holds stays");
                assertTrue(Files.exists(elsewhere), "a held doorbell was removed");
                assertTrue(Files.exists(Path.of(live.path())), "a live doorbell of this process was removed");
                assertTrue(Files.exists(Path.of(next.path())));
            }
        } finally {
            if (holder != null) {
                holder.close();
            }
            live.close();
            Files.deleteIfExists(dead);
            Files.deleteIfExists(elsewhere);
        }
        assertFalse(Files.exists(Path.of(live.path())));
    }
}
