package dev.ferry.microbench;

import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.SparseTable;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/** Helpers shared by the benchmarks' states. */
final class Rows {

    static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private Rows() {
    }

    /** Creates every id of {@code ids} in the table (first pulls), in batches. */
    static void populate(SparseTable table, long[] ids) {
        int chunk = 1 << 14;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate((long) chunk * table.dimension() * Float.BYTES, 64);
            for (int from = 0; from < ids.length; from += chunk) {
                table.gather(ids, from, Math.min(chunk, ids.length - from), out);
            }
        }
    }

    /** Creates the ids {@code [0, space)} on whichever server of {@code servers} owns each. */
    static void populate(ParameterServer[] servers, dev.ferry.ps.SlotTable slots, String table, int space) {
        int[] count = new int[servers.length];
        for (long id = 0; id < space; id++) {
            count[slots.serverOf(id)]++;
        }
        long[][] ids = new long[servers.length][];
        for (int s = 0; s < servers.length; s++) {
            ids[s] = new long[count[s]];
            count[s] = 0;
        }
        for (long id = 0; id < space; id++) {
            int s = slots.serverOf(id);
            ids[s][count[s]++] = id;
        }
        for (int s = 0; s < servers.length; s++) {
            populate(servers[s].table(table), ids[s]);
        }
    }
}
