package dev.ferry.memory;

import java.lang.foreign.MemorySegment;

/**
 * Registers memory with a network device so that the device may read and write it directly.
 * The fabric implementation calls {@code fi_mr_reg}; {@link #NONE} serves transports that need no
 * registration (kernel TCP).
 */
@FunctionalInterface
public interface MemoryRegistrar {

    /** Registers {@code segment} for local sends and receives and for remote reads and writes. */
    Registration register(MemorySegment segment);

    /** A registrar for transports without registration: descriptors and keys are 0. */
    MemoryRegistrar NONE = segment -> new Registration() {
        @Override
        public long descriptor() {
            return 0;
        }

        @Override
        public long key() {
            return 0;
        }

        @Override
        public long remoteAddress(long offset) {
            return segment.address() + offset;
        }

        @Override
        public void close() {
        }
    };

    /** One registration: valid until closed. Closing twice is harmless. */
    interface Registration extends AutoCloseable {

        /** The local descriptor to pass with libfabric data calls on this memory (0 when none). */
        long descriptor();

        /** The key a peer presents to read or write this memory remotely. */
        long key();

        /**
         * The address a peer names to reach the byte at {@code offset} into the registered
         * segment: its virtual address or the offset itself, depending on the provider's
         * {@code FI_MR_VIRT_ADDR} mode.
         */
        long remoteAddress(long offset);

        /** Deregisters the memory. */
        @Override
        void close();
    }
}
