package dev.ferry.cluster;

import java.util.Objects;

/**
 * Where a cluster lives in ZooKeeper and how it reacts, each tunable with its default and why.
 *
 * @param connectString          ZooKeeper servers, {@code host:port[,host:port...]}
 * @param name                   the cluster's name: its znodes live under {@code /ferry/<name>}
 * @param sessionTimeoutMillis   how long ZooKeeper waits for a silent member before its member node
 *                               expires: the floor of failure detection (a killed server is seen
 *                               gone this long plus about half a second later). Default 4 s: above
 *                               a long GC pause of a small heap, far below a restart. The ZooKeeper
 *                               server clamps it to [2, 20] x its tickTime
 * @param connectionTimeoutMillis how long to wait for the first connection. Default 10 s
 * @param maxGroupsPerMove       the largest slot move (in groups of 64 slots); bigger transfers run
 *                               as several moves, one at a time, so that copying never swamps the
 *                               push and pull traffic. Default 64 (a sixteenth of the slots)
 * @param replicationFactor      copies of each slot group, the primary's included, on distinct
 *                               members: a push is acknowledged once every in-sync copy applied it.
 *                               Default 2: one server may die without losing an acknowledged push,
 *                               for twice the memory. 1: no replication (a dead server's groups
 *                               restart from its last checkpoint)
 * @param minInSync              the fewest in-sync copies a push is acknowledged with; below it
 *                               pushes are refused ({@code NOT_ENOUGH_REPLICAS}). Default 1: keep
 *                               serving on the primary alone while a lost copy is rebuilt
 *                               (availability); 2 with r = 2 refuses pushes meanwhile (durability)
 * @param replicationTimeoutMillis how long a primary waits for a backup's answer before it has the
 *                               controller drop it from the in-sync set. Default 1 s: far above a
 *                               replication round trip (sub-millisecond), below a client's deadline
 * @param cutOffGraceMillis      0 (default): a member keeps serving while its ZooKeeper connection
 *                               is suspended (servers outlive a lost quorum). Above 0: it stops
 *                               acknowledging pushes as soon as the connection is suspended and
 *                               stops serving pulls this long after (keep it below a third of the
 *                               session: suspension is seen about two thirds into it), so that a
 *                               member cut off from a working ZooKeeper serves nothing stale once
 *                               its groups can have been promoted elsewhere; but then a lost quorum
 *                               stops every server too
 */
public record ClusterConfig(String connectString, String name, int sessionTimeoutMillis, int connectionTimeoutMillis,
        int maxGroupsPerMove, int replicationFactor, int minInSync, int replicationTimeoutMillis,
        int cutOffGraceMillis) {

    /** Checks the values. */
    public ClusterConfig {
        Objects.requireNonNull(connectString, "connectString");
        Objects.requireNonNull(name, "name");
        if (connectString.isBlank() || name.isBlank() || name.contains("/")) {
            throw new IllegalArgumentException("a cluster needs ZooKeeper servers and a name without '/': '"
                    + connectString + "', '" + name + "'");
        }
        if (sessionTimeoutMillis < 100 || connectionTimeoutMillis < 100 || maxGroupsPerMove < 1) {
            throw new IllegalArgumentException("timeouts must be >= 100 ms and moves >= 1 group: "
                    + sessionTimeoutMillis + ", " + connectionTimeoutMillis + ", " + maxGroupsPerMove);
        }
        if (replicationFactor < 1 || replicationFactor > 8 || minInSync < 1 || minInSync > replicationFactor
                || replicationTimeoutMillis < 1 || cutOffGraceMillis < 0) {
            throw new IllegalArgumentException("replication needs 1 <= minInSync <= replicas <= 8 and a timeout >= 1 ms: "
                    + replicationFactor + " replicas, minInSync " + minInSync + ", " + replicationTimeoutMillis + " ms");
        }
    }

    /** The defaults for a cluster {@code name} on {@code connectString}. */
    public static ClusterConfig of(String connectString, String name) {
        return new ClusterConfig(connectString, name, 4_000, 10_000, 64, 2, 1, 1_000, 0);
    }

    /**
     * Parses {@code zk://host:port[,host:port...]/name}.
     *
     * @throws IllegalArgumentException if it is not of that form
     */
    public static ClusterConfig parse(String uri) {
        Objects.requireNonNull(uri, "uri");
        if (!uri.startsWith("zk://")) {
            throw new IllegalArgumentException("a cluster address is zk://host:port[,host:port...]/name, not '" + uri + "'");
        }
        String rest = uri.substring("zk://".length());
        int slash = rest.indexOf('/');
        if (slash <= 0 || slash == rest.length() - 1) {
            throw new IllegalArgumentException("a cluster address is zk://host:port[,host:port...]/name, not '" + uri + "'");
        }
        return of(rest.substring(0, slash), rest.substring(slash + 1));
    }

    /** This configuration with another session timeout. */
    public ClusterConfig withSessionTimeoutMillis(int millis) {
        return new ClusterConfig(connectString, name, millis, connectionTimeoutMillis, maxGroupsPerMove,
                replicationFactor, minInSync, replicationTimeoutMillis, cutOffGraceMillis);
    }

    /** This configuration with another move size. */
    public ClusterConfig withMaxGroupsPerMove(int groups) {
        return new ClusterConfig(connectString, name, sessionTimeoutMillis, connectionTimeoutMillis, groups,
                replicationFactor, minInSync, replicationTimeoutMillis, cutOffGraceMillis);
    }

    /** This configuration with {@code replicas} copies per group and {@code minInSync}. */
    public ClusterConfig withReplication(int replicas, int minInSync) {
        return new ClusterConfig(connectString, name, sessionTimeoutMillis, connectionTimeoutMillis, maxGroupsPerMove,
                replicas, minInSync, replicationTimeoutMillis, cutOffGraceMillis);
    }

    /** This configuration with another replication timeout. */
    public ClusterConfig withReplicationTimeoutMillis(int millis) {
        return new ClusterConfig(connectString, name, sessionTimeoutMillis, connectionTimeoutMillis, maxGroupsPerMove,
                replicationFactor, minInSync, millis, cutOffGraceMillis);
    }

    /** This configuration with a cut-off grace period (0: off). */
    public ClusterConfig withCutOffGraceMillis(int millis) {
        return new ClusterConfig(connectString, name, sessionTimeoutMillis, connectionTimeoutMillis, maxGroupsPerMove,
                replicationFactor, minInSync, replicationTimeoutMillis, millis);
    }

    /** The {@code zk://} form. */
    public String uri() {
        return "zk://" + connectString + "/" + name;
    }

    /** The cluster's root znode. */
    public String root() {
        return "/ferry/" + name;
    }
}
