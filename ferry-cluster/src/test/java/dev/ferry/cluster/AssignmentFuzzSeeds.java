package dev.ferry.cluster;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import dev.ferry.ps.net.RoutingTable;

/**
 * Writes the seed inputs of {@link AssignmentFuzzTest} with {@link Assignment#encode} (run from
 * the module directory; see docs/fuzzing.md): the empty table, three members, and a move.
 */
public final class AssignmentFuzzSeeds {

    private AssignmentFuzzSeeds() {
    }

    public static void main(String[] args) throws IOException {
        Path dir = Path.of(args.length > 0 ? args[0] : "src/test/resources/dev/ferry/cluster/AssignmentFuzzTestInputs/decode");
        Files.createDirectories(dir);
        Files.write(dir.resolve("empty"), Assignment.empty().encode());
        Map<String, String> addresses = Map.of("a", "10.0.0.1:7000", "b", "10.0.0.2:7000", "c", "10.0.0.3:7000");
        List<String> owners = new ArrayList<>();
        for (int g = 0; g < RoutingTable.GROUPS; g++) {
            owners.add(g % 3 == 0 ? "a" : g % 3 == 1 ? "b" : "c");
        }
        Assignment three = new Assignment(7, 2, 5, owners, addresses, null, Map.of());
        Files.write(dir.resolve("three-members"), three.encode());
        Assignment moving = new Assignment(8, 2, 6, owners, addresses, new Move(5, "a", "c", new int[] {0, 3, 6}),
                Map.of(9, "d"));
        Files.write(dir.resolve("three-members-moving"), moving.encode());
        Assignment restoring = new Assignment(9, 3, 6, owners, addresses, null, Map.of(1, "gone", 4, "gone"));
        Files.write(dir.resolve("three-members-restoring"), restoring.encode());
    }
}
