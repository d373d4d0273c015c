package dev.ferry.bench.ps;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import dev.ferry.ps.net.PsServer;
import dev.ferry.ps.net.Replicas;
import dev.ferry.ps.net.RoutingTable;

/**
 * The fixed layout of a benchmark run with {@code --replicas}: server {@code i} is member
 * {@code s<i>}, slot group {@code g} is owned by server {@code g mod n} (epoch 0), and with r = 2
 * backed up by the next server, {@code (g + 1) mod n}. The driver hands every server the
 * addresses ({@code TABLE a,b,...} on its standard input) and each installs the same routing
 * table and replicas, as a controller would, but once: no ZooKeeper, which is off the data path.
 */
final class MemberLayout {

    private MemberLayout() {
    }

    /** The member id of server {@code index}. */
    static String member(int index) {
        return "s" + index;
    }

    static int owner(int group, int servers) {
        return group % servers;
    }

    /** Whether server {@code index} holds id {@code id}'s row (as its owner or its backup). */
    static boolean holds(long id, int index, int servers, int replicas) {
        int owner = owner(RoutingTable.groupOf(id), servers);
        return owner == index || replicas == 2 && (owner + 1) % servers == index;
    }

    /** Installs the layout into {@code server} from the driver's {@code TABLE a,b,...} line. */
    static void install(PsServer server, String line, int replicas) {
        if (server == null || line == null || !line.startsWith("TABLE ")) {
            throw new IllegalStateException("expected TABLE <addresses> for a Ferry member server, got " + line);
        }
        List<String> addresses = Arrays.asList(line.substring("TABLE ".length()).trim().split(","));
        int n = addresses.size();
        List<String> members = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            members.add(member(i));
        }
        int[] owners = new int[RoutingTable.GROUPS];
        long[] epochs = new long[RoutingTable.GROUPS];
        int[][] backups = new int[RoutingTable.GROUPS][];
        for (int g = 0; g < owners.length; g++) {
            owners[g] = owner(g, n);
            backups[g] = replicas == 2 ? new int[] {(owners[g] + 1) % n} : null;
        }
        RoutingTable table = RoutingTable.of(1, members, addresses, owners);
        if (!server.install(table, Replicas.of(1, epochs, backups, 1))) {
            throw new IllegalStateException("the member did not install the benchmark's routing table");
        }
    }
}
