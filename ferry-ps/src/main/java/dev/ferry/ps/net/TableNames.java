package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Objects;

/**
 * The table names of the data path, both ways, without a new {@code String} or {@code byte[]}
 * per request: a server reads a request's name by comparing its bytes with the names it met last
 * ({@link #decode}), a client encodes the name it pulled from last once ({@link #encode}).
 *
 * <p>Each thread has its own few entries (a server's progress and handler threads, a client's
 * calling threads), so nothing is shared and nothing locks; a name not among them is decoded or
 * encoded as before and takes the place of the entry used longest ago. The answers are exactly
 * those of {@code new String(bytes, UTF_8)} and {@link PsDescriptor#nameBytes}: an entry is kept
 * by its bytes, so two byte strings that decode to one {@code String} (malformed UTF-8) are two
 * entries, and only an entry whose bytes encoding its name gives back answers {@link #encode}.
 * Callers must not change the arrays {@link #encode} returns.
 */
final class TableNames {

    /** Entries per thread: a server's data path meets a few hot tables at a time. */
    static final int ENTRIES = 8;

    private static final ThreadLocal<TableNames> CACHE = ThreadLocal.withInitial(TableNames::new);

    private final byte[][] bytes = new byte[ENTRIES][];
    /** Heap views of {@link #bytes}, so that a comparison allocates nothing. */
    private final MemorySegment[] views = new MemorySegment[ENTRIES];
    private final String[] names = new String[ENTRIES];
    /** Whether an entry's bytes are what {@link PsDescriptor#nameBytes} gives for its name. */
    private final boolean[] canonical = new boolean[ENTRIES];
    private int next;

    private TableNames() {
    }

    /**
     * The name of {@code length} UTF-8 bytes at {@code offset} of {@code body}; the same
     * {@code String} instance each time this thread meets the same bytes while they stay cached.
     */
    static String decode(MemorySegment body, long offset, int length) {
        return CACHE.get().decodeHere(body, offset, length);
    }

    /** {@link PsDescriptor#nameBytes}, the same array each time this thread encodes an equal name. */
    static byte[] encode(String name) {
        return CACHE.get().encodeHere(Objects.requireNonNull(name, "name"));
    }

    private String decodeHere(MemorySegment body, long offset, int length) {
        for (int i = 0; i < ENTRIES; i++) {
            byte[] b = bytes[i];
            if (b != null && b.length == length
                    && MemorySegment.mismatch(body, offset, offset + length, views[i], 0, length) == -1) {
                return names[i];
            }
        }
        byte[] b = new byte[length];
        MemorySegment.copy(body, ValueLayout.JAVA_BYTE, offset, b, 0, length);
        String name = new String(b, StandardCharsets.UTF_8);
        // Only bytes that encoding the name gives back, and that the wire allows, may answer encode.
        put(b, name, length > 0 && Arrays.equals(b, name.getBytes(StandardCharsets.UTF_8)));
        return name;
    }

    private byte[] encodeHere(String name) {
        for (int i = 0; i < ENTRIES; i++) {
            if (canonical[i] && (names[i] == name || names[i].equals(name))) {
                return bytes[i];
            }
        }
        byte[] b = PsDescriptor.nameBytes(name);
        put(b, name, true);
        return b;
    }

    private void put(byte[] b, String name, boolean canonicalBytes) {
        int at = next;
        next = (at + 1) % ENTRIES;
        bytes[at] = b;
        views[at] = MemorySegment.ofArray(b);
        names[at] = name;
        canonical[at] = canonicalBytes;
    }
}
