package dev.ferry.memory;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/** A registrar that counts registrations and closes, and remembers closes beyond the first. */
final class CountingRegistrar implements MemoryRegistrar {

    final class CountingRegistration implements Registration {
        final MemorySegment segment;
        final long key;
        final AtomicInteger closes = new AtomicInteger();

        CountingRegistration(MemorySegment segment, long key) {
            this.segment = segment;
            this.key = key;
        }

        @Override
        public long descriptor() {
            return 0x1000 + key;
        }

        @Override
        public long key() {
            return key;
        }

        @Override
        public long remoteAddress(long offset) {
            return segment.address() + offset;
        }

        @Override
        public void close() {
            if (closes.incrementAndGet() == 1) {
                closed.incrementAndGet();
            }
        }
    }

    private final AtomicInteger registered = new AtomicInteger();
    private final AtomicInteger closed = new AtomicInteger();
    final List<CountingRegistration> all = new CopyOnWriteArrayList<>();

    @Override
    public Registration register(MemorySegment segment) {
        CountingRegistration registration = new CountingRegistration(segment, registered.incrementAndGet());
        all.add(registration);
        return registration;
    }

    int registrations() {
        return registered.get();
    }

    int closed() {
        return closed.get();
    }

    int live() {
        return registered.get() - closed.get();
    }

    /** Registrations closed more than once (each must be closed exactly once). */
    long closedTwice() {
        return all.stream().filter(r -> r.closes.get() > 1).count();
    }
}
