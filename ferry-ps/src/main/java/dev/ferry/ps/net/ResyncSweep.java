package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.RowTransfer;
import dev.ferry.ps.Slots;
import dev.ferry.ps.SparseTable;

/**
 * The deletions a follower's catch-up cannot be told about: after a checkpoint load or a full
 * resync from one training server, the rows of the slots it exports that it no longer has (deleted
 * while the follower was out of touch for longer than the deletions are remembered, or held by
 * the follower from before it lost track) are swept from the local tables.
 *
 * <p>A catch-up pages through the rows changed up to the tick it sealed; a row changed after that
 * seal, while the pages were read, comes only in the next poll. So the sweep records the ids of
 * every row the catch-up and the next poll deliver (checkpoint rows and pages, applied or older
 * than the local copy), and after that next poll, if the training server's log and exported
 * slots are still the ones of the catch-up, deletes each local row of those slots (and of the
 * slots this server still holds) whose id was not delivered. If the log or the slots changed, the
 * sweep is dropped: the catch-up that follows makes a new one. Memory: 8 bytes per delivered id,
 * for the two polls.
 *
 * <p>Owned by the follower's poller thread.
 */
final class ResyncSweep {

    private final long logId;
    private final int primaries;
    /** The slots the training server exports and this server wanted at the catch-up; null: unknown. */
    private long[] slots;
    /** Per table, the ids delivered. */
    private final Map<String, Ids> seen = new LinkedHashMap<>();
    private int polls;

    ResyncSweep(long logId, int primaries) {
        this.logId = logId;
        this.primaries = primaries;
    }

    /** The training server exports {@code exported} (a slot bitmap); this server wants {@code wanted}. */
    void slots(long[] exported, long[] wanted) {
        long[] s = new long[wanted.length];
        for (int i = 0; i < s.length; i++) {
            s[i] = exported[i] & wanted[i];
        }
        slots = s;
    }

    /** Forgets the ids seen so far (a catch-up that falls back to a resync from tick 0 starts again). */
    void restart() {
        seen.clear();
    }

    /** Whether the catch-up's training server still has the same log and exported slots. */
    boolean matches(long logId, int primaries) {
        return this.logId == logId && this.primaries == primaries;
    }

    /** Registers a table the training server exports, also if none of its rows arrive. */
    void table(String name) {
        seen.computeIfAbsent(name, n -> new Ids());
    }

    /** The ids of whole rows (of {@code rowBytes} each) delivered for {@code table}. */
    void rows(String name, MemorySegment rows, long rowBytes) {
        Ids ids = seen.computeIfAbsent(name, n -> new Ids());
        for (long at = 0; at + rowBytes <= rows.byteSize(); at += rowBytes) {
            ids.add(RowTransfer.idOf(rows, at));
        }
    }

    /** Counts a poll done; true once the catch-up and the poll after it have both been recorded. */
    boolean polled() {
        return ++polls >= 2;
    }

    /**
     * Deletes the local rows of the swept slots that this server still {@code wants} whose ids
     * were not delivered; returns how many. Does nothing if the exported slots are unknown.
     */
    long run(ParameterServer ps, long[] wants) {
        if (slots == null) {
            return 0;
        }
        long[] sweep = new long[slots.length];
        boolean any = false;
        for (int i = 0; i < sweep.length; i++) {
            sweep[i] = slots[i] & wants[i];
            any |= sweep[i] != 0;
        }
        if (!any) {
            return 0;
        }
        long deleted = 0;
        for (Map.Entry<String, Ids> e : seen.entrySet()) {
            SparseTable table;
            try {
                table = ps.table(e.getKey());
            } catch (PsException gone) {
                continue;
            }
            long[] ids = e.getValue().sorted();
            deleted += RowTransfer.deleteIf(table, id -> {
                int slot = Slots.slotOf(id);
                return (sweep[slot >>> 6] & (1L << (slot & 63))) != 0 && Arrays.binarySearch(ids, id) < 0;
            });
        }
        return deleted;
    }

    /** A growing list of ids. */
    private static final class Ids {
        private long[] ids = new long[256];
        private int count;

        void add(long id) {
            if (count == ids.length) {
                ids = Arrays.copyOf(ids, ids.length * 2);
            }
            ids[count++] = id;
        }

        long[] sorted() {
            long[] s = Arrays.copyOf(ids, count);
            Arrays.sort(s);
            return s;
        }
    }
}
