package dev.ferry.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Leftover regions: those named after this process's id go before its first endpoint; those a
 * Ferry session marked and no live process holds go when a new session starts; a live
 * session's, another library's and anything else stay. A session's region is removed by its
 * normal close.
 */
class ShmRegionsTest {

    @TempDir
    Path dir;
    /** A directory on /dev/shm itself (tmpfs, with user extended attributes), removed after each test. */
    private Path shm;

    @AfterEach
    void removeShmDirectory() throws IOException {
        if (shm != null) {
            try (Stream<Path> files = Files.walk(shm)) {
                for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }

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
        assertEquals(0, ShmRegions.removeDeadRegions(dir.resolve("absent")));
    }

    @Test
    void markedRegionsThatNobodyHoldsAreRemovedAndTheRestStays() throws Exception {
        shm = Files.createTempDirectory(ShmRegions.DIRECTORY, "ferry-regions-test-");
        Path dead = Files.writeString(shm.resolve("1000001:0:0"), "a dead Ferry process's");
        Path live = Files.writeString(shm.resolve("1000002:0:0"), "a live Ferry process's");
        Path foreign = Files.writeString(shm.resolve("1000003:0:0"), "another libfabric user's, unmarked");
        Path other = Files.writeString(shm.resolve("ferry-doorbell-1-2"), "not a region");
        ShmRegions.claim(dead).close(); // marked, then its owner went away
        OwnerLock holder = ShmRegions.claim(live);
        assertNotNull(holder);
        try {
            assertEquals(1, ShmRegions.removeDeadRegions(shm));
            assertFalse(Files.exists(dead));
            assertTrue(Files.exists(live), "a region held by a live session was removed");
            assertTrue(Files.exists(foreign), "an unmarked region was removed");
            assertTrue(Files.exists(other));
            assertEquals(0, ShmRegions.removeDeadRegions(shm));
        } finally {
            holder.close();
        }
        assertEquals(1, ShmRegions.removeDeadRegions(shm), "released, the region is a dead one");
        assertFalse(Files.exists(live));
        assertTrue(Files.exists(foreign));
    }

    @Test
    void regionNamesComeFromShmAddresses() {
        assertEquals(ShmRegions.DIRECTORY.resolve("123:0:4"),
                ShmRegions.regionOf("fi_shm://123:0:4\0".getBytes(java.nio.charset.StandardCharsets.UTF_8)));
        assertEquals(null, ShmRegions.regionOf("fi_shm://../etc/passwd".getBytes(java.nio.charset.StandardCharsets.UTF_8)));
        assertEquals(null, ShmRegions.regionOf(new byte[] {127, 0, 0, 1}));
    }

    @Test
    void aSessionHoldsItsRegionAndItsCloseRemovesIt() {
        Path region;
        try (FabricSession session = FabricSession.open("shm", EndpointType.RDM, FabricProviders.HOST, true, 64)) {
            region = ShmRegions.regionOf(session.address());
            assertNotNull(region, new String(session.address(), java.nio.charset.StandardCharsets.UTF_8));
            assertTrue(Files.exists(region), region + " is missing");
            ShmRegions.removeDeadRegions(region.getParent());
            assertTrue(Files.exists(region), "the live session's region was taken for a dead one");
        }
        assertFalse(Files.exists(region), "the closed session left its region " + region);
    }
}
