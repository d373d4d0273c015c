package dev.ferry.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Leftover regions named after a process id go; everything else stays. */
class ShmRegionsTest {

    @TempDir
    Path dir;

    @Test
    void onlyRegionsNamedAfterThePidAreRemoved() throws Exception {
        Files.writeString(dir.resolve("4242:0:0"), "stale");
        Files.writeString(dir.resolve("4242:1:0"), "stale");
        Files.writeString(dir.resolve("42420:0:0"), "another process");
        Files.writeString(dir.resolve("fi_ns_lock"), "libfabric's own");
        assertEquals(2, ShmRegions.removeLeftovers(dir, 4242));
        assertFalse(Files.exists(dir.resolve("4242:0:0")));
        assertFalse(Files.exists(dir.resolve("4242:1:0")));
        assertTrue(Files.exists(dir.resolve("42420:0:0")));
        assertTrue(Files.exists(dir.resolve("fi_ns_lock")));
    }

    @Test
    void aMissingDirectoryIsNothingToRemove() {
        assertEquals(0, ShmRegions.removeLeftovers(dir.resolve("absent"), 1));
    }
}
