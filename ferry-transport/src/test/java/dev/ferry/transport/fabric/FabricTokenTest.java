package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The fabric token excludes: one holder at a time, and the assertions catch a second one. */
@Timeout(60)
class FabricTokenTest {

    @Test
    void holdersExcludeEachOther() throws Exception {
        FabricToken token = new FabricToken();
        int threads = 4;
        int rounds = 50_000;
        long[] inside = new long[1]; // a plain counter: lost updates would show a second holder
        long[] acquired = new long[threads];
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> started = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int me = t;
            started.add(Thread.ofPlatform().start(() -> {
                try {
                    for (int i = 0; i < rounds; i++) {
                        if (me == 0) {
                            token.acquire(); // the progress thread's way
                        } else if (!token.tryAcquire()) {
                            continue;
                        }
                        assertTrue(token.heldByCurrentThread());
                        inside[0]++;
                        acquired[me]++;
                        token.release();
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }));
        }
        for (Thread t : started) {
            t.join();
        }
        if (failure.get() != null) {
            throw new AssertionError(failure.get());
        }
        long total = 0;
        for (long a : acquired) {
            total += a;
        }
        assertEquals(total, inside[0], "two threads were inside at once");
        assertEquals(rounds, acquired[0], "the blocking acquire always gets the token");
        assertFalse(token.heldByCurrentThread());
    }

    @Test
    void aReleaseByANonHolderTripsTheAssertion() {
        assumeTrue(FabricToken.class.desiredAssertionStatus(), "needs -ea");
        FabricToken token = new FabricToken();
        assertThrows(AssertionError.class, token::release);
    }

    @Test
    void aSecondHolderTripsTheAssertion() throws Exception {
        assumeTrue(FabricToken.class.desiredAssertionStatus(), "needs -ea");
        FabricToken token = new FabricToken();
        token.breakExclusionForTest();
        assertTrue(token.tryAcquire());
        CountDownLatch done = new CountDownLatch(1);
        AtomicReference<Throwable> second = new AtomicReference<>();
        Thread.ofPlatform().name("second-holder").start(() -> {
            try {
                token.tryAcquire();
            } catch (Throwable e) {
                second.set(e);
            } finally {
                done.countDown();
            }
        });
        assertTrue(done.await(10, TimeUnit.SECONDS));
        assertNotNull(second.get(), "a second holder went unnoticed");
        assertTrue(second.get() instanceof AssertionError, second.get().toString());
        assertTrue(second.get().getMessage().contains("second-holder"), second.get().getMessage());
    }
}
