package dev.ferry.transport.fabric;

import java.lang.foreign.MemorySegment;

import dev.ferry.fabric.Domain;
import dev.ferry.fabric.MemoryRegion;
import dev.ferry.memory.MemoryRegistrar;

/** Registers the allocator's slabs with a libfabric domain. */
final class FabricRegistrar implements MemoryRegistrar {

    private final Domain domain;

    FabricRegistrar(Domain domain) {
        this.domain = domain;
    }

    @Override
    public Registration register(MemorySegment segment) {
        MemoryRegion region = domain.register(segment);
        return new Registration() {
            @Override
            public long descriptor() {
                return region.descriptor();
            }

            @Override
            public long key() {
                return region.key();
            }

            @Override
            public long remoteAddress(long offset) {
                return region.remoteAddress(offset);
            }

            @Override
            public void close() {
                region.close();
            }
        };
    }
}
