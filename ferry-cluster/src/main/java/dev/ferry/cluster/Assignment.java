package dev.ferry.cluster;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

import dev.ferry.ps.net.RoutingTable;

/**
 * The cluster's slot-group table as the controller writes it to ZooKeeper: which member owns each
 * of the {@link RoutingTable#GROUPS} slot groups, the address clients reach each member at, the
 * move in flight, and the {@link #generation()} that clients route by. Immutable.
 *
 * <p>Bytes in ZooKeeper (big-endian, {@link DataOutputStream}):
 * <pre>
 *  magic i32 'FRYA' | layout version i32 (2; 1 had no restores) | generation i64 | controller epoch i64 | next move id i64
 *  members i32, then per member: id (modified UTF-8), address (modified UTF-8)
 *  owners: GROUPS x u16, the index of the owner among the members, 0xFFFF for none
 *  move: present u8, then id i64, from index u16, to index u16, groups i32, groups x u16
 *  restores i32, then per entry: group u16, the dead owner's id (modified UTF-8)
 *  (layout 3) move copy flag u8, then per group: epoch i64, backups u8, backups x u16
 * </pre>
 * A 1,024-group table with ten members takes about 2.5 KB, far below ZooKeeper's 1 MiB limit.
 *
 * @param generation      bumped by every change; clients route by it
 * @param controllerEpoch the epoch of the controller that wrote it
 * @param nextMoveId      the id the next move gets
 * @param owners          per group the owning member's id, or null for none (only before the
 *                        first member joins)
 * @param addresses       member id to the address clients call it at; has every owner
 * @param move            the move in flight, or null
 * @param restoreFrom     groups reassigned because their owner died, to that owner's id: the new
 *                        owner restores their rows from the dead owner's last checkpoint before it
 *                        serves them. An entry lasts until the group moves or is reassigned again
 * @param backups         per group its in-sync backups (the owner is its primary), distinct members
 *                        other than the owner, each with an address
 * @param epochs          per group its epoch, bumped whenever its primary changes (in the same
 *                        write as the generation): backups take rows only from the primary of
 *                        the epoch they know
 */
public record Assignment(long generation, long controllerEpoch, long nextMoveId, List<String> owners,
        Map<String, String> addresses, Move move, Map<Integer, String> restoreFrom, List<List<String>> backups,
        List<Long> epochs) {

    private static final int MAGIC = 0x46525941;
    private static final int LAYOUT = 3;
    private static final int NONE = 0xFFFF;

    /** An assignment without replicas: no backups, every epoch 0. */
    public Assignment(long generation, long controllerEpoch, long nextMoveId, List<String> owners,
            Map<String, String> addresses, Move move, Map<Integer, String> restoreFrom) {
        this(generation, controllerEpoch, nextMoveId, owners, addresses, move, restoreFrom, noBackups(), zeroEpochs());
    }

    static List<List<String>> noBackups() {
        return Collections.nCopies(RoutingTable.GROUPS, List.of());
    }

    static List<Long> zeroEpochs() {
        return Collections.nCopies(RoutingTable.GROUPS, 0L);
    }

    /** Checks the values. */
    public Assignment {
        if (owners.size() != RoutingTable.GROUPS) {
            throw new IllegalArgumentException("an assignment has " + RoutingTable.GROUPS + " groups, not "
                    + owners.size());
        }
        owners = Collections.unmodifiableList(new ArrayList<>(owners));
        addresses = Collections.unmodifiableMap(new TreeMap<>(addresses));
        restoreFrom = Collections.unmodifiableMap(new TreeMap<>(restoreFrom));
        for (int g : restoreFrom.keySet()) {
            if (g < 0 || g >= RoutingTable.GROUPS) {
                throw new IllegalArgumentException("a restore of group " + g + ", outside [0, " + RoutingTable.GROUPS + ")");
            }
        }
        for (String owner : owners) {
            if (owner != null && !addresses.containsKey(owner)) {
                throw new IllegalArgumentException("owner " + owner + " has no address");
            }
        }
        if (move != null && (!addresses.containsKey(move.from()) || !addresses.containsKey(move.to()))) {
            throw new IllegalArgumentException("a move between unknown members: " + move);
        }
        if (backups.size() != RoutingTable.GROUPS || epochs.size() != RoutingTable.GROUPS) {
            throw new IllegalArgumentException("an assignment has backups and epochs for " + RoutingTable.GROUPS
                    + " groups, not " + backups.size() + " and " + epochs.size());
        }
        List<List<String>> b = new ArrayList<>(RoutingTable.GROUPS);
        for (int g = 0; g < RoutingTable.GROUPS; g++) {
            List<String> of = List.copyOf(backups.get(g));
            for (String m : of) {
                if (!addresses.containsKey(m) || m.equals(owners.get(g)) || of.indexOf(m) != of.lastIndexOf(m)) {
                    throw new IllegalArgumentException("group " + g + " has backups " + of + " with owner "
                            + owners.get(g) + ": each must be another known member, once");
                }
            }
            b.add(of);
        }
        backups = Collections.unmodifiableList(b);
        epochs = List.copyOf(epochs);
    }

    /** The in-sync backups of {@code group}. */
    public List<String> backupsOf(int group) {
        return backups.get(group);
    }

    /** The epoch of {@code group}. */
    public long epoch(int group) {
        return epochs.get(group);
    }

    /** An assignment one generation later with the values given. */
    Assignment next(long epoch, long nextMoveId, String[] owners, Map<String, String> addresses, Move move,
            Map<Integer, String> restoreFrom, List<List<String>> backups, long[] epochs) {
        List<Long> e = new ArrayList<>(epochs.length);
        for (long x : epochs) {
            e.add(x);
        }
        return new Assignment(generation + 1, epoch, nextMoveId, Arrays.asList(owners), addresses, move, restoreFrom,
                backups, e);
    }

    /** The replicas the servers enforce with {@link #routingTable()} (same member order). */
    public dev.ferry.ps.net.Replicas replicas(int minInSync) {
        List<String> members = new ArrayList<>(addresses.keySet());
        long[] e = new long[RoutingTable.GROUPS];
        int[][] b = new int[RoutingTable.GROUPS][];
        for (int g = 0; g < RoutingTable.GROUPS; g++) {
            e[g] = epochs.get(g);
            List<String> of = backups.get(g);
            b[g] = new int[of.size()];
            for (int i = 0; i < of.size(); i++) {
                b[g][i] = members.indexOf(of.get(i));
            }
        }
        return dev.ferry.ps.net.Replicas.of(generation, e, b, minInSync);
    }

    /** The table before any member joined: generation 0, every group unowned. */
    public static Assignment empty() {
        return new Assignment(0, 0, 1, Arrays.asList(new String[RoutingTable.GROUPS]), Map.of(), null, Map.of());
    }

    /** The owner of {@code group}, or null. */
    public String owner(int group) {
        return owners.get(group);
    }

    /** How many groups {@code member} owns. */
    public int groupCount(String member) {
        int n = 0;
        for (String o : owners) {
            if (member.equals(o)) {
                n++;
            }
        }
        return n;
    }

    /** Groups per owner, in member order (members without groups but with an address included). */
    public Map<String, Integer> groupCounts() {
        Map<String, Integer> counts = new TreeMap<>();
        addresses.keySet().forEach(m -> counts.put(m, 0));
        for (String o : owners) {
            if (o != null) {
                counts.merge(o, 1, Integer::sum);
            }
        }
        return counts;
    }

    /** The routing table the servers enforce and hand to clients. */
    public RoutingTable routingTable() {
        List<String> members = new ArrayList<>(addresses.keySet());
        List<String> endpoints = members.stream().map(addresses::get).toList();
        int[] ownerOfGroup = new int[RoutingTable.GROUPS];
        for (int g = 0; g < ownerOfGroup.length; g++) {
            String o = owners.get(g);
            ownerOfGroup[g] = o == null ? -1 : members.indexOf(o);
        }
        return RoutingTable.of(generation, members, endpoints, ownerOfGroup);
    }


    /** The bytes stored in ZooKeeper. */
    public byte[] encode() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(4096);
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(MAGIC);
            out.writeInt(LAYOUT);
            out.writeLong(generation);
            out.writeLong(controllerEpoch);
            out.writeLong(nextMoveId);
            List<String> members = new ArrayList<>(addresses.keySet());
            out.writeInt(members.size());
            for (String m : members) {
                out.writeUTF(m);
                out.writeUTF(addresses.get(m));
            }
            for (String o : owners) {
                out.writeShort(o == null ? NONE : members.indexOf(o));
            }
            out.writeBoolean(move != null);
            if (move != null) {
                out.writeLong(move.id());
                out.writeShort(members.indexOf(move.from()));
                out.writeShort(members.indexOf(move.to()));
                int[] groups = move.groups();
                out.writeInt(groups.length);
                for (int g : groups) {
                    out.writeShort(g);
                }
            }
            out.writeInt(restoreFrom.size());
            for (Map.Entry<Integer, String> e : restoreFrom.entrySet()) {
                out.writeShort(e.getKey());
                out.writeUTF(e.getValue());
            }
            out.writeBoolean(move != null && move.copy());
            for (int g = 0; g < RoutingTable.GROUPS; g++) {
                out.writeLong(epochs.get(g));
                List<String> of = backups.get(g);
                out.writeByte(of.size());
                for (String m : of) {
                    out.writeShort(members.indexOf(m));
                }
            }
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        return bytes.toByteArray();
    }

    /**
     * Reads the bytes stored in ZooKeeper.
     *
     * @throws IllegalArgumentException if they are not an assignment of this layout
     */
    public static Assignment decode(byte[] data) {
        Objects.requireNonNull(data, "data");
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(data))) {
            if (in.readInt() != MAGIC) {
                throw new IllegalArgumentException("not a Ferry assignment (" + data.length + " bytes)");
            }
            int layout = in.readInt();
            if (layout < 1 || layout > LAYOUT) {
                throw new IllegalArgumentException("assignment layout " + layout + "; this build reads 1 to " + LAYOUT);
            }
            long generation = in.readLong();
            long epoch = in.readLong();
            long nextMoveId = in.readLong();
            int count = in.readInt();
            // A member takes at least its two string lengths: a count the bytes cannot hold is corrupt.
            if (count < 0 || count > in.available() / 4) {
                throw new IllegalArgumentException("an assignment of " + data.length + " bytes claims " + count
                        + " members");
            }
            List<String> members = new ArrayList<>(count);
            Map<String, String> addresses = new TreeMap<>();
            for (int i = 0; i < count; i++) {
                String id = in.readUTF();
                members.add(id);
                addresses.put(id, in.readUTF());
            }
            String[] owners = new String[RoutingTable.GROUPS];
            for (int g = 0; g < owners.length; g++) {
                int o = in.readUnsignedShort();
                owners[g] = o == NONE ? null : members.get(o);
            }
            Move move = null;
            if (in.readBoolean()) {
                long id = in.readLong();
                String from = members.get(in.readUnsignedShort());
                String to = members.get(in.readUnsignedShort());
                int n = in.readInt();
                if (n < 0 || n > RoutingTable.GROUPS) {
                    throw new IllegalArgumentException("a move of " + n + " groups; there are " + RoutingTable.GROUPS);
                }
                int[] groups = new int[n];
                for (int i = 0; i < groups.length; i++) {
                    groups[i] = in.readUnsignedShort();
                }
                move = new Move(id, from, to, groups);
            }
            Map<Integer, String> restore = new TreeMap<>();
            int restores = layout == 1 ? 0 : in.readInt();
            if (restores < 0 || restores > RoutingTable.GROUPS) {
                throw new IllegalArgumentException("an assignment with " + restores + " restores");
            }
            for (int i = 0; i < restores; i++) {
                restore.put(in.readUnsignedShort(), in.readUTF());
            }
            if (layout < 3) {
                return new Assignment(generation, epoch, nextMoveId, Arrays.asList(owners), addresses, move, restore);
            }
            if (in.readBoolean() && move != null) {
                move = new Move(move.id(), move.from(), move.to(), move.groups(), true);
            }
            List<List<String>> backups = new ArrayList<>(RoutingTable.GROUPS);
            List<Long> epochs = new ArrayList<>(RoutingTable.GROUPS);
            for (int g = 0; g < RoutingTable.GROUPS; g++) {
                epochs.add(in.readLong());
                int n = in.readUnsignedByte();
                List<String> of = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    of.add(members.get(in.readUnsignedShort()));
                }
                backups.add(of);
            }
            return new Assignment(generation, epoch, nextMoveId, Arrays.asList(owners), addresses, move, restore,
                    backups, epochs);
        } catch (IOException | IndexOutOfBoundsException e) {
            throw new IllegalArgumentException("a truncated or corrupt assignment of " + data.length + " bytes", e);
        }
    }
}
