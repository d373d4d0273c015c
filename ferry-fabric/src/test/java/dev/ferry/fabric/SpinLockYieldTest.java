package dev.ferry.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** libfabric's spin locks made to yield ({@link SpinLockYield}): its call table, and the lock itself. */
@Timeout(60)
class SpinLockYieldTest {

    private static final Linker LINKER = Linker.nativeLinker();

    private static MethodHandle libc(String name) {
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
    }

    @Test
    void libfabricsOwnCallsGoToTheYieldingLock() {
        assertTrue(Fabric.libraryVersion().length() > 0); // loads libfabric, and with it the change
        assertEquals(1, SpinLockYield.hooked(), "libfabric 1.17 calls pthread_spin_lock from one table entry");
    }

    @Test
    void theSpinTurnsAreANumberFromOneTo65536() {
        assertEquals(SpinLockYield.DEFAULT_SPINS, SpinLockYield.spins(null));
        assertEquals(SpinLockYield.DEFAULT_SPINS, SpinLockYield.spins(" "));
        assertEquals(1, SpinLockYield.spins("1"));
        assertEquals(65_536, SpinLockYield.spins(" 65536 "));
        for (String bad : List.of("0", "-3", "65537", "lots", "2.5")) {
            IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                    () -> SpinLockYield.spins(bad));
            assertTrue(e.getMessage().contains(SpinLockYield.SPINS_PROPERTY + "=" + bad), e.getMessage());
            // Where libfabric loads, a bad value is said and the default used: loading must not fail.
            assertEquals(SpinLockYield.DEFAULT_SPINS, SpinLockYield.spinsOrDefault(bad));
        }
        assertEquals(300, SpinLockYield.spinsOrDefault("300"));
    }

    @Test
    void itExcludesAndSharesTheLockWordWithTheLibcLock() throws Throwable {
        // Six threads, half locking with the helper, half with libc's own, on one lock word that
        // libc initialised, each unlocking with libc's: every increment of a plain counter kept.
        MethodHandle init = libc("pthread_spin_init");
        MethodHandle libcLock = LINKER.downcallHandle(LINKER.defaultLookup().find("pthread_spin_lock").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS));
        MethodHandle unlock = LINKER.downcallHandle(LINKER.defaultLookup().find("pthread_spin_unlock").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS));
        MethodHandle yielding = LINKER.downcallHandle(SpinLockYield.lockFunction(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS));
        assertTrue(Fabric.libraryVersion().length() > 0); // the helper knows the lock word once installed
        try (Arena arena = Arena.ofShared()) {
            MemorySegment lock = arena.allocate(64, 64);
            MemorySegment counter = arena.allocate(8, 8);
            assertEquals(0, (int) init.invokeExact(lock, 0));
            int threads = 6;
            int rounds = 50_000;
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> started = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                MethodHandle take = t % 2 == 0 ? yielding : libcLock;
                started.add(Thread.ofPlatform().start(() -> {
                    try {
                        for (int i = 0; i < rounds; i++) {
                            assertEquals(0, (int) take.invokeExact(lock));
                            counter.set(ValueLayout.JAVA_LONG, 0, counter.get(ValueLayout.JAVA_LONG, 0) + 1);
                            assertEquals(0, (int) unlock.invokeExact(lock));
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
                throw failure.get();
            }
            assertEquals((long) threads * rounds, counter.get(ValueLayout.JAVA_LONG, 0));
        }
    }
}
