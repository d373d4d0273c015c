package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The guess whether shm copies straight between processes, from its two inputs. */
class ShmDirectCopyTest {

    @Test
    void noYamaAndNothingSwitchedOffAllowsTheDirectCopy() {
        assertTrue(ShmDirectCopy.directCopyAllowed(null, -1));
        assertTrue(ShmDirectCopy.directCopyAllowed(null, 0));
        assertTrue(ShmDirectCopy.directCopyAllowed("0", 0));
        assertTrue(ShmDirectCopy.directCopyAllowed("no", -1));
        assertTrue(ShmDirectCopy.directCopyAllowed("false", -1));
    }

    @Test
    void yamaRestrictingPtraceOrCmaSwitchedOffMeansBounceBuffers() {
        assertFalse(ShmDirectCopy.directCopyAllowed(null, 1));
        assertFalse(ShmDirectCopy.directCopyAllowed(null, 3));
        for (String on : new String[] {"1", "on", "ON", "true", "yes", " y "}) {
            assertFalse(ShmDirectCopy.directCopyAllowed(on, -1), on);
        }
    }
}
