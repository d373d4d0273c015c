package dev.ferry.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/**
 * On shm a departed peer's address stays in the address vector for a grace period, and a peer
 * that comes back with the same address gets its handle back instead of a second insertion.
 */
class RetiredAddressesTest {

    @Test
    void aPeerThatComesBackTakesItsRetiredHandleAndNeverFillsTheAddressVector() {
        try (FabricSession a = FabricSession.open("shm", EndpointType.RDM, FabricProviders.HOST, false, 64);
                FabricSession b = FabricSession.open("shm", EndpointType.RDM, FabricProviders.HOST, false, 64)) {
            FabricSession.Connection first = a.connect(b.address(), 0);
            long handle = first.peer();
            first.close();
            assertEquals(1, a.retiredAddresses(), "the address waits out its grace period");
            // More comings and goings than the address vector holds (256): each one takes the
            // retired handle back; inserting each time would run out of entries.
            for (int i = 0; i < 300; i++) {
                FabricSession.Connection again = a.connect(b.address(), 0);
                assertEquals(handle, again.peer(), "round " + i);
                assertEquals(0, a.retiredAddresses());
                again.close();
                assertEquals(1, a.retiredAddresses());
            }
        }
    }

    @Test
    void retiredAddressesLeaveAfterTheGracePeriodOrWhenRoomIsNeeded() {
        try (FabricSession a = FabricSession.open("shm", EndpointType.RDM, FabricProviders.HOST, false, 64);
                FabricSession b = FabricSession.open("shm", EndpointType.RDM, FabricProviders.HOST, false, 64);
                FabricSession c = FabricSession.open("shm", EndpointType.RDM, FabricProviders.HOST, false, 64);
                AddressVector av = a.domain().openAddressVector(8)) {
            RetiredAddresses retired = new RetiredAddresses(av, 2);
            long t0 = 1_000_000L;
            retired.retire(av.insert(b.address()), b.address(), t0);
            retired.retire(av.insert(c.address()), c.address(), t0 + 1);
            assertEquals(-1, retired.revive(a.address()), "an address never retired");
            retired.purge(t0 + RetiredAddresses.GRACE_NANOS - 1);
            assertEquals(2, retired.size(), "both within their grace period");
            retired.makeRoom(0);
            assertEquals(1, retired.size(), "two retired and no room for a third: the oldest goes");
            retired.purge(t0 + RetiredAddresses.GRACE_NANOS);
            assertEquals(1, retired.size(), "the younger one is still within its grace period");
            retired.purge(t0 + 1 + RetiredAddresses.GRACE_NANOS);
            assertEquals(0, retired.size());
            // Both were removed from the vector: inserting them again succeeds and revives nothing.
            long again = av.insert(b.address());
            retired.retire(again, b.address(), t0);
            assertEquals(again, retired.revive(b.address()));
            assertEquals(0, retired.size());
        }
    }
}
