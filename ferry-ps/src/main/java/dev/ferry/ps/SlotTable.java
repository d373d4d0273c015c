package dev.ferry.ps;

import java.util.Arrays;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * An immutable map from the {@link Slots#COUNT} virtual slots to server indices
 * {@code [0, serverCount)}. Clients route with it; servers keep it in their checkpoints.
 *
 * <p>Every id of every batch is looked up in it (a client's plan, a server's ownership check), at
 * random slots, between copies of rows that fill the caches: so the lookups read a byte per slot
 * (64 KiB) where the table has at most 256 servers, and a server checks its own slots in a bitmap
 * of 8 KiB ({@link #owned}).
 */
public final class SlotTable {

    private final int[] serverOfSlot;
    private final int serverCount;
    /** The same map a byte per slot (unsigned) where {@code serverCount <= 256}; null otherwise. */
    private final byte[] narrow;
    /**
     * Each server's {@link #owned} bitmap, made when first asked (several servers of one process
     * may share a table). Bitmaps are immutable, so two threads that make the same one at once
     * both get a correct one.
     */
    private final AtomicReferenceArray<OwnedSlots> ownedByServer;
    /**
     * The last bitmap asked for by a server outside the table (one that left, or has not joined):
     * every request to it is refused, and it should not scan the table for each.
     */
    private volatile OwnedSlots outside;

    private SlotTable(int[] serverOfSlot, int serverCount) {
        this.serverOfSlot = serverOfSlot;
        this.serverCount = serverCount;
        if (serverCount <= 256) {
            narrow = new byte[serverOfSlot.length];
            for (int slot = 0; slot < serverOfSlot.length; slot++) {
                narrow[slot] = (byte) serverOfSlot[slot];
            }
        } else {
            narrow = null;
        }
        ownedByServer = new AtomicReferenceArray<>(serverCount);
    }

    /** Contiguous ranges of slots, as equal as they can be, for {@code serverCount} servers. */
    public static SlotTable balanced(int serverCount) {
        checkServerCount(serverCount);
        int[] map = new int[Slots.COUNT];
        for (int slot = 0; slot < Slots.COUNT; slot++) {
            map[slot] = (int) ((long) slot * serverCount / Slots.COUNT);
        }
        return new SlotTable(map, serverCount);
    }

    /**
     * A table from an explicit assignment (one server index per slot), as read from a checkpoint
     * or received from a coordinator.
     *
     * @throws PsException {@code INVALID_ARGUMENT} if the array is not {@link Slots#COUNT} long,
     *                     or names a server outside {@code [0, serverCount)}
     */
    public static SlotTable of(int[] serverOfSlot, int serverCount) {
        Objects.requireNonNull(serverOfSlot, "serverOfSlot");
        checkServerCount(serverCount);
        if (serverOfSlot.length != Slots.COUNT) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT,
                    "a slot table has " + Slots.COUNT + " slots, not " + serverOfSlot.length);
        }
        int[] copy = serverOfSlot.clone();
        for (int slot = 0; slot < copy.length; slot++) {
            if (copy[slot] < 0 || copy[slot] >= serverCount) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "slot " + slot + " maps to server "
                        + copy[slot] + ", outside [0, " + serverCount + ")");
            }
        }
        return new SlotTable(copy, serverCount);
    }

    /**
     * The same table resized to {@code newServerCount} servers, moving as few slots as possible:
     * each server keeps its slots up to its new fair share, and only the surplus (and the slots of
     * removed servers) move, to the servers below their share, lowest index first.
     */
    public SlotTable withServerCount(int newServerCount) {
        checkServerCount(newServerCount);
        int[] quota = new int[newServerCount];
        for (int s = 0; s < newServerCount; s++) {
            quota[s] = Slots.COUNT / newServerCount + (s < Slots.COUNT % newServerCount ? 1 : 0);
        }
        int[] map = new int[Slots.COUNT];
        int[] kept = new int[newServerCount];
        int[] orphans = new int[Slots.COUNT];
        int orphanCount = 0;
        for (int slot = 0; slot < Slots.COUNT; slot++) {
            int s = serverOfSlot[slot];
            if (s < newServerCount && kept[s] < quota[s]) {
                map[slot] = s;
                kept[s]++;
            } else {
                orphans[orphanCount++] = slot;
            }
        }
        int next = 0;
        for (int i = 0; i < orphanCount; i++) {
            while (kept[next] >= quota[next]) {
                next++;
            }
            map[orphans[i]] = next;
            kept[next]++;
        }
        return new SlotTable(map, newServerCount);
    }

    /** The number of servers. */
    public int serverCount() {
        return serverCount;
    }

    /** The server that owns a slot. */
    public int serverOfSlot(int slot) {
        byte[] narrow = this.narrow;
        return narrow != null ? narrow[slot] & 0xFF : serverOfSlot[slot];
    }

    /** The server that owns an id. */
    public int serverOf(long id) {
        return serverOfSlot(Slots.slotOf(id));
    }

    /**
     * The slots {@code server} owns in this table, as a bitmap made once per server; none (an
     * empty bitmap, kept for the next ask) for an index outside {@code [0, serverCount)}, such as a
     * member the table does not name.
     */
    public OwnedSlots owned(int server) {
        if (server < 0 || server >= serverCount) {
            OwnedSlots none = outside;
            if (none == null || none.server() != server) {
                none = new OwnedSlots(server);
                outside = none;
            }
            return none;
        }
        OwnedSlots known = ownedByServer.get(server);
        if (known == null) {
            known = new OwnedSlots(server, serverOfSlot);
            ownedByServer.set(server, known);
        }
        return known;
    }

    /** How many slots a server owns. */
    public int slotCount(int server) {
        int n = 0;
        for (int s : serverOfSlot) {
            if (s == server) {
                n++;
            }
        }
        return n;
    }

    /** A copy of the assignment, one server index per slot. */
    public int[] toArray() {
        return serverOfSlot.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof SlotTable other && other.serverCount == serverCount
                && Arrays.equals(other.serverOfSlot, serverOfSlot);
    }

    @Override
    public int hashCode() {
        return 31 * serverCount + Arrays.hashCode(serverOfSlot);
    }

    @Override
    public String toString() {
        return "SlotTable[" + serverCount + " servers]";
    }

    private static void checkServerCount(int serverCount) {
        if (serverCount < 1 || serverCount > Slots.COUNT) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT,
                    "server count must be in [1, " + Slots.COUNT + "]: " + serverCount);
        }
    }
}
