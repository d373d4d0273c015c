package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

import dev.ferry.ps.PsException;
import dev.ferry.ps.SlotTable;
import dev.ferry.ps.Slots;

/**
 * The slot table a cluster routes by at one {@link #generation()}: which server owns each slot,
 * and, in a cluster run by a controller, each server's member id and address. Immutable.
 *
 * <p>Ownership moves in {@link #GROUPS} slot groups of {@link #SLOTS_PER_GROUP} consecutive slots
 * ({@code group = slot >> 6}), so that a table of groups stays small in ZooKeeper and on the
 * wire. A fixed cluster (addresses given to every client, generation 0) may use any
 * {@link SlotTable}, group-aligned or not.
 *
 * <p>Every request carries the client's generation and every answer the server's, so that a
 * client learns of a newer table on its next call, and a server that no longer owns a slot answers
 * {@code WRONG_SERVER} with its generation; the client then fetches this table again.
 *
 * <p>On the wire ({@code ROUTING} response), little-endian:
 * <pre>
 *  generation i64 | server count i32 | members i32 (0 for a fixed cluster) | per-group flag i32 | 4 reserved
 *  per member: id length u16, address length u16, id UTF-8, address UTF-8, zero-padded to 8
 *  owners: GROUPS x u16 if per-group, else Slots.COUNT x u16
 * </pre>
 */
public final class RoutingTable {

    /** Slot groups: ownership moves by group. */
    public static final int GROUPS = 1024;
    /** Slots per group. */
    public static final int SLOTS_PER_GROUP = Slots.COUNT / GROUPS;

    private final long generation;
    private final List<String> members;
    private final List<String> addresses;
    private final SlotTable slots;
    private final boolean grouped;

    private RoutingTable(long generation, List<String> members, List<String> addresses, SlotTable slots,
            boolean grouped) {
        this.generation = generation;
        this.members = List.copyOf(members);
        this.addresses = List.copyOf(addresses);
        this.slots = slots;
        this.grouped = grouped;
    }

    /** A fixed cluster's table: generation 0, no member ids, addresses known to the clients. */
    public static RoutingTable fixed(SlotTable slots) {
        return new RoutingTable(0, List.of(), List.of(), Objects.requireNonNull(slots, "slots"), false);
    }

    /**
     * A controller's table: server {@code i} is member {@code members.get(i)} at
     * {@code addresses.get(i)}; group {@code g} belongs to server {@code ownerOfGroup[g]} (-1 for
     * none: only before any member joined; routed to server 0, which refuses it).
     *
     * @throws PsException {@code INVALID_ARGUMENT} for inconsistent sizes or owners
     */
    public static RoutingTable of(long generation, List<String> members, List<String> addresses, int[] ownerOfGroup) {
        if (members.size() != addresses.size() || members.isEmpty() || ownerOfGroup.length != GROUPS) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "a routing table needs one address per member"
                    + " (" + members.size() + " members, " + addresses.size() + " addresses) and " + GROUPS
                    + " owners (" + ownerOfGroup.length + ")");
        }
        int[] map = new int[Slots.COUNT];
        for (int s = 0; s < Slots.COUNT; s++) {
            int owner = ownerOfGroup[s / SLOTS_PER_GROUP];
            if (owner < -1 || owner >= members.size()) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "group " + s / SLOTS_PER_GROUP
                        + " has owner " + owner + " outside [0, " + members.size() + ")");
            }
            map[s] = Math.max(owner, 0);
        }
        return new RoutingTable(generation, members, addresses, SlotTable.of(map, members.size()), true);
    }

    /** The group of a slot. */
    public static int groupOfSlot(int slot) {
        return slot / SLOTS_PER_GROUP;
    }

    /** The group of an id. */
    public static int groupOf(long id) {
        return groupOfSlot(Slots.slotOf(id));
    }

    /** Bumped by every change of ownership; 0 for a fixed cluster. */
    public long generation() {
        return generation;
    }

    /** The slot-to-server map. */
    public SlotTable slots() {
        return slots;
    }

    /** The number of servers. */
    public int serverCount() {
        return slots.serverCount();
    }

    /** Member ids, in server order; empty for a fixed cluster. */
    public List<String> members() {
        return members;
    }

    /** Addresses, in server order; empty for a fixed cluster (the clients know them). */
    public List<String> addresses() {
        return addresses;
    }

    /** The index of a member, or -1. */
    public int indexOf(String member) {
        return members.indexOf(member);
    }

    /** The server that owns {@code group}. */
    public int ownerOfGroup(int group) {
        return slots.serverOfSlot(group * SLOTS_PER_GROUP);
    }

    /** Groups owned by server {@code index}. */
    public int groupCount(int index) {
        int n = 0;
        for (int g = 0; g < GROUPS; g++) {
            if (ownerOfGroup(g) == index) {
                n++;
            }
        }
        return n;
    }

    // ------------------------------------------------------------------------------------------
    // Wire

    /** Bytes of this table on the wire. */
    public int wireBytes() {
        int bytes = 24;
        for (int i = 0; i < members.size(); i++) {
            bytes += pad(4 + utf8(members.get(i)).length + utf8(addresses.get(i)).length);
        }
        return bytes + (grouped ? GROUPS : Slots.COUNT) * Short.BYTES;
    }

    /** Writes the table; {@code out} holds {@link #wireBytes()}. */
    public void write(MemorySegment out) {
        out.set(PsDescriptor.LONG, 0, generation);
        out.set(PsDescriptor.INT, 8, slots.serverCount());
        out.set(PsDescriptor.INT, 12, members.size());
        out.set(PsDescriptor.INT, 16, grouped ? 1 : 0);
        out.set(PsDescriptor.INT, 20, 0);
        long at = 24;
        for (int i = 0; i < members.size(); i++) {
            byte[] id = utf8(members.get(i));
            byte[] address = utf8(addresses.get(i));
            out.set(PsDescriptor.SHORT, at, (short) id.length);
            out.set(PsDescriptor.SHORT, at + 2, (short) address.length);
            MemorySegment.copy(id, 0, out, ValueLayout.JAVA_BYTE, at + 4, id.length);
            MemorySegment.copy(address, 0, out, ValueLayout.JAVA_BYTE, at + 4 + id.length, address.length);
            int used = 4 + id.length + address.length;
            out.asSlice(at + used, pad(used) - used).fill((byte) 0);
            at += pad(used);
        }
        int entries = grouped ? GROUPS : Slots.COUNT;
        int step = grouped ? SLOTS_PER_GROUP : 1;
        for (int e = 0; e < entries; e++) {
            out.set(PsDescriptor.SHORT, at + (long) e * Short.BYTES, (short) slots.serverOfSlot(e * step));
        }
    }

    /**
     * Reads a table written by {@link #write}.
     *
     * @throws PsException {@code LENGTH_MISMATCH} or {@code INVALID_ARGUMENT} if the bytes are not one
     */
    public static RoutingTable read(MemorySegment in) {
        if (in.byteSize() < 24) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "a routing table of " + in.byteSize() + " bytes");
        }
        long generation = in.get(PsDescriptor.LONG, 0);
        int serverCount = in.get(PsDescriptor.INT, 8);
        int count = in.get(PsDescriptor.INT, 12);
        boolean grouped = in.get(PsDescriptor.INT, 16) == 1;
        List<String> members = new ArrayList<>(count);
        List<String> addresses = new ArrayList<>(count);
        long at = 24;
        for (int i = 0; i < count; i++) {
            int idLength = Short.toUnsignedInt(in.get(PsDescriptor.SHORT, at));
            int addressLength = Short.toUnsignedInt(in.get(PsDescriptor.SHORT, at + 2));
            members.add(string(in, at + 4, idLength));
            addresses.add(string(in, at + 4 + idLength, addressLength));
            at += pad(4 + idLength + addressLength);
        }
        int entries = grouped ? GROUPS : Slots.COUNT;
        if (in.byteSize() != at + (long) entries * Short.BYTES) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "a routing table of " + in.byteSize()
                    + " bytes; its header says " + (at + (long) entries * Short.BYTES));
        }
        int[] owners = new int[entries];
        for (int e = 0; e < entries; e++) {
            owners[e] = Short.toUnsignedInt(in.get(PsDescriptor.SHORT, at + (long) e * Short.BYTES));
        }
        if (grouped) {
            return of(generation, members, addresses, owners);
        }
        return new RoutingTable(generation, members, addresses, SlotTable.of(owners, serverCount), false);
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static String string(MemorySegment in, long at, int length) {
        byte[] bytes = new byte[length];
        MemorySegment.copy(in, ValueLayout.JAVA_BYTE, at, bytes, 0, length);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static int pad(int bytes) {
        return (bytes + 7) & ~7;
    }

    @Override
    public String toString() {
        return "RoutingTable[generation " + generation + ", " + serverCount() + " servers]";
    }
}
