package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;

import dev.ferry.ps.PsException;
import dev.ferry.rpc.RpcMethod;

/**
 * The wire layout of push replication, primary to backup ({@code REPLICATE}). Little-endian.
 *
 * <pre>
 *  request:
 *   PsDescriptor's common header: kind SPARSE, the table's name and dimension,
 *     count = rows, offset = groups, generation = the primary's routing generation,
 *     dedupe = the push's dedupe id (0: none)
 *   groups x  | group i32 | 4 reserved | epoch i64 |      the primary's epoch of each group
 *   rows x    whole rows (RowLayout: id, steps, weights, optimizer state), the format of
 *             checkpoints and slot moves; the step count is the row's version
 *  answer:
 *   | status i32 | 4 reserved | the backup's routing generation i64 |
 * </pre>
 *
 * Statuses are return codes, not errors: the primary acts on each (retry, fail the push, or
 * have the backup removed from the in-sync set). A malformed request is refused with a
 * {@link PsException} as any other method.
 */
public final class ReplicationDescriptor {

    /**
     * Server to server: the rows a push updated, with their optimizer state, applied by a backup
     * (merged by step count; repeats harmless), its dedupe id recorded for their groups.
     */
    public static final RpcMethod REPLICATE = RpcMethod.idempotent(0x5101);

    /**
     * Server to server, at the start of a slot move or copy: the dedupe ids the source recorded
     * for the moving groups ({@code count} entries of {@code group i32 | 4 reserved | dedupe id i64}
     * after the common header, whose dedupe field is the move's id); later pushes' ids come with
     * their forwarded rows ({@code MOVE_ROWS} with the push's dedupe id in the generation field).
     */
    public static final RpcMethod MOVE_DEDUPE = RpcMethod.idempotent(0x5102);

    /** Bytes per group entry. */
    public static final int GROUP_ENTRY = 16;
    /** Bytes of the answer. */
    public static final int ANSWER = 16;

    /** The rows were applied. */
    public static final int APPLIED = 0;
    /** Refused: the backup knows a newer epoch of a group; the sender is no longer its primary. */
    public static final int FENCED = 1;
    /** Not applied yet: the backup has not installed the sender's generation (or table); try again. */
    public static final int BEHIND = 2;
    /** Refused: at the sender's epoch the backup is not in the group's in-sync set. */
    public static final int NOT_IN_SYNC = 3;

    private ReplicationDescriptor() {
    }

    /** Bytes of a request with {@code groups} groups and {@code rows} rows of {@code rowBytes}. */
    public static long requestBytes(int nameLength, int groups, int rows, long rowBytes) {
        return PsDescriptor.payloadOffset(nameLength) + (long) groups * GROUP_ENTRY + rows * rowBytes;
    }

    /** Where the group entries start. */
    static long groupsAt(MemorySegment body) {
        return PsDescriptor.payloadOffset(PsDescriptor.nameLength(body));
    }

    static void writeGroup(MemorySegment body, long groupsAt, int i, int group, long epoch) {
        body.set(PsDescriptor.INT, groupsAt + (long) i * GROUP_ENTRY, group);
        body.set(PsDescriptor.INT, groupsAt + (long) i * GROUP_ENTRY + 4, 0);
        body.set(PsDescriptor.LONG, groupsAt + (long) i * GROUP_ENTRY + 8, epoch);
    }

    static int group(MemorySegment body, long groupsAt, int i) {
        int g = body.get(PsDescriptor.INT, groupsAt + (long) i * GROUP_ENTRY);
        if (g < 0 || g >= RoutingTable.GROUPS) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "REPLICATE names group " + g + ", outside [0, "
                    + RoutingTable.GROUPS + ")");
        }
        return g;
    }

    static long epoch(MemorySegment body, long groupsAt, int i) {
        return body.get(PsDescriptor.LONG, groupsAt + (long) i * GROUP_ENTRY + 8);
    }

    static void writeAnswer(MemorySegment out, int status, long generation) {
        out.set(PsDescriptor.INT, 0, status);
        out.set(PsDescriptor.INT, 4, 0);
        out.set(PsDescriptor.LONG, 8, generation);
    }

    static int status(MemorySegment answer) {
        if (answer.byteSize() != ANSWER) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "a REPLICATE answer of " + answer.byteSize()
                    + " bytes; expected " + ANSWER);
        }
        return answer.get(PsDescriptor.INT, 0);
    }
}
