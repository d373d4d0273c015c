package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * Native per-operation contexts: slot {@code i} is 64 bytes, as large as {@code FI_CONTEXT2},
 * so the same code serves providers that ask for {@code FI_CONTEXT}/{@code FI_CONTEXT2} (they
 * use the memory until the completion) and those that only echo the pointer back. A completion's
 * context maps back to its slot with {@link #slot(long)}.
 */
public final class OperationContexts implements AutoCloseable {

    /** Bytes per slot: {@code struct fi_context2} is eight pointers. */
    public static final int SLOT_BYTES = 64;

    private final Arena arena = Arena.ofShared();
    private final long base;
    private final int slots;

    /** {@code slots} contexts. */
    public OperationContexts(int slots) {
        if (slots <= 0) {
            throw new IllegalArgumentException("slots must be positive: " + slots);
        }
        this.slots = slots;
        MemorySegment memory = arena.allocate((long) slots * SLOT_BYTES, SLOT_BYTES);
        this.base = memory.address();
    }

    /** The number of slots. */
    public int size() {
        return slots;
    }

    /** The context pointer of slot {@code i}. */
    public long context(int i) {
        return base + (long) i * SLOT_BYTES;
    }

    /** The slot of a context pointer, or -1 if the pointer is not one of these slots. */
    public int slot(long context) {
        long offset = context - base;
        if (offset < 0 || offset >= (long) slots * SLOT_BYTES || (offset & (SLOT_BYTES - 1)) != 0) {
            return -1;
        }
        return (int) (offset / SLOT_BYTES);
    }

    /** Frees the slots; only after every operation using them completed or its endpoint closed. */
    @Override
    public void close() {
        arena.close();
    }
}
