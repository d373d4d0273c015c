package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static dev.ferry.fabric.InfoDescriptor.CQ_DATA_ENTRY;
import static dev.ferry.fabric.InfoDescriptor.offset;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A reusable native array of completion entries ({@code fi_cq_data_entry}) that
 * {@link CompletionQueue#read} fills; read entry {@code i} with the accessors. Owned by one
 * polling thread; allocates nothing after construction.
 */
public final class CompletionBatch implements AutoCloseable {

    private static final long ENTRY = CQ_DATA_ENTRY.byteSize();
    private static final long CONTEXT = offset(CQ_DATA_ENTRY, "op_context");
    private static final long FLAGS = offset(CQ_DATA_ENTRY, "flags");
    private static final long LEN = offset(CQ_DATA_ENTRY, "len");
    private static final long BUF = offset(CQ_DATA_ENTRY, "buf");
    private static final long DATA = offset(CQ_DATA_ENTRY, "data");

    private final Arena arena = Arena.ofShared();
    final MemorySegment entries;
    final MemorySegment sources;
    final int capacity;

    /** A batch of up to {@code capacity} entries. */
    public CompletionBatch(int capacity) {
        if (capacity <= 0) {
            throw new IllegalArgumentException("capacity must be positive: " + capacity);
        }
        this.capacity = capacity;
        this.entries = arena.allocate(CQ_DATA_ENTRY, capacity);
        this.sources = arena.allocate(JAVA_LONG, capacity);
    }

    /** How many entries one read can return. */
    public int capacity() {
        return capacity;
    }

    /** The context passed with the operation that completed. */
    public long context(int i) {
        return entries.get(JAVA_LONG, i * ENTRY + CONTEXT);
    }

    /** The completion flags ({@code Fi.SEND}, {@code Fi.RECV}, {@code Fi.REMOTE_CQ_DATA}, ...). */
    public long flags(int i) {
        return entries.get(JAVA_LONG, i * ENTRY + FLAGS);
    }

    /** Bytes received (receive completions). */
    public long length(int i) {
        return entries.get(JAVA_LONG, i * ENTRY + LEN);
    }

    /** Where the data landed, for providers that report it. */
    public long buffer(int i) {
        return entries.get(JAVA_LONG, i * ENTRY + BUF);
    }

    /** Immediate data, valid when {@link #flags} has {@code Fi.REMOTE_CQ_DATA}. */
    public long data(int i) {
        return entries.get(JAVA_LONG, i * ENTRY + DATA);
    }

    /**
     * The sender's address-vector handle of entry {@code i}, after
     * {@link CompletionQueue#readFrom}; {@link Fi#ADDR_UNSPEC} when the provider did not say.
     */
    public long source(int i) {
        return sources.getAtIndex(JAVA_LONG, i);
    }

    /** Frees the native array. */
    @Override
    public void close() {
        arena.close();
    }
}
