package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.ferry.ps.net.RoutingTable;

/**
 * Fuzzes {@link Assignment#decode}, the reading of the slot-group table a controller stored in
 * ZooKeeper: it returns an assignment, which encodes to bytes that decode to the same again, or
 * throws the {@link IllegalArgumentException} it documents; never another exception, and never
 * an allocation sized by a count the bytes cannot hold.
 */
class AssignmentFuzzTest {

    @FuzzTest
    void decode(byte[] data) {
        Assignment assignment;
        try {
            assignment = Assignment.decode(data);
        } catch (IllegalArgumentException refused) {
            return;
        }
        assertEquals(RoutingTable.GROUPS, assignment.owners().size());
        byte[] encoded = assignment.encode();
        assertArrayEquals(encoded, Assignment.decode(encoded).encode(), "decode(encode(a)) is not a");
    }
}
