package dev.ferry.cluster;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.zookeeper.KeeperException;

/**
 * An operator's view of a cluster, straight from ZooKeeper ({@code bin/ferry cluster status},
 * {@code remove}): members, the assignment, moves in flight, drain requests. Not a member: it
 * never writes the assignment.
 */
public final class ClusterAdmin implements AutoCloseable {

    private final ClusterConfig config;
    private final ClusterPaths paths;
    private final CuratorFramework zk;

    private ClusterAdmin(ClusterConfig config) {
        this.config = config;
        this.paths = new ClusterPaths(config);
        this.zk = ClusterMember.client(config);
    }

    /**
     * Connects to the cluster's ZooKeeper.
     *
     * @throws IllegalStateException if it cannot be reached within the connection timeout
     */
    public static ClusterAdmin connect(ClusterConfig config) {
        ClusterAdmin admin = new ClusterAdmin(config);
        admin.zk.start();
        try {
            if (!admin.zk.blockUntilConnected(config.connectionTimeoutMillis(), TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("no ZooKeeper at " + config.connectString() + " within "
                        + config.connectionTimeoutMillis() + " ms");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            admin.close();
            throw new IllegalStateException("interrupted", e);
        } catch (RuntimeException e) {
            admin.close();
            throw e;
        }
        return admin;
    }

    /**
     * What ZooKeeper holds now.
     *
     * @param members    live members, by id
     * @param assignment the assignment (empty before the first member)
     * @param draining   members asked to leave
     * @param controller the controller's member id, or null
     * @param moves      reported move statuses by move id
     */
    public record Status(Map<String, MemberInfo> members, Assignment assignment, Set<String> draining,
            String controller, Map<Long, String> moves) {

        /** The bootstrap address clients connect with: every live member's address. */
        public String clientAddress() {
            List<String> addresses = new ArrayList<>();
            members.values().forEach(m -> addresses.add(m.address()));
            return "ferry://" + String.join(",", addresses);
        }
    }

    /** Reads the cluster's state. */
    public Status status() {
        try {
            Map<String, MemberInfo> members = new TreeMap<>();
            for (String id : children(paths.members)) {
                try {
                    members.put(id, MemberInfo.decode(zk.getData().forPath(paths.member(id))));
                } catch (KeeperException.NoNodeException gone) {
                    // expired meanwhile
                }
            }
            Assignment assignment;
            try {
                assignment = Assignment.decode(zk.getData().forPath(paths.assignment));
            } catch (KeeperException.NoNodeException none) {
                assignment = Assignment.empty();
            }
            Map<Long, String> moves = new TreeMap<>();
            for (String name : children(paths.moves)) {
                long id = moveId(name);
                if (id < 0) {
                    continue; // not a move's status
                }
                try {
                    moves.put(id, new String(zk.getData().forPath(paths.moves + "/" + name), StandardCharsets.UTF_8));
                } catch (KeeperException.NoNodeException gone) {
                    // done meanwhile
                }
            }
            String controller = null;
            try {
                // Only read: a latch that is never started takes no part in the election.
                var leader = new LeaderLatch(zk, paths.latch).getLeader();
                controller = leader.isLeader() ? leader.getId() : null;
            } catch (KeeperException.NoNodeException none) {
                // no member yet
            }
            return new Status(members, assignment, new TreeSet<>(children(paths.drain)), controller, moves);
        } catch (Exception e) {
            throw new IllegalStateException("cannot read cluster " + config.uri() + ": " + e, e);
        }
    }

    /** Asks member {@code id} to leave cleanly: its groups move away, then it exits. */
    public void remove(String id) {
        try {
            if (zk.checkExists().forPath(paths.member(id)) == null) {
                throw new IllegalArgumentException("no live member '" + id + "' in " + config.uri());
            }
            zk.create().orSetData().creatingParentsIfNeeded().forPath(paths.drain(id), new byte[0]);
        } catch (IllegalArgumentException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException("cannot ask " + id + " to leave: " + e, e);
        }
    }

    /** Waits until member {@code id}'s node is gone; returns whether it went in time. */
    public boolean awaitGone(String id, long timeoutMillis) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        while (zk.checkExists().forPath(paths.member(id)) != null) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(10);
        }
        return true;
    }

    /** Deletes the drain request of a member that left. */
    public void forget(String id) {
        try {
            zk.delete().forPath(paths.drain(id));
        } catch (KeeperException.NoNodeException none) {
            // nothing to forget
        } catch (Exception e) {
            throw new IllegalStateException("cannot forget " + id + ": " + e, e);
        }
    }

    /** The status as lines for a person. */
    public static String format(Status s) {
        StringBuilder b = new StringBuilder();
        Assignment a = s.assignment();
        b.append(String.format(Locale.ROOT, "generation %d, controller %s (epoch %d), %d members%n", a.generation(),
                s.controller() == null ? "none" : s.controller(), a.controllerEpoch(), s.members().size()));
        Map<String, Integer> counts = a.groupCounts();
        for (MemberInfo m : s.members().values()) {
            int groups = counts.getOrDefault(m.id(), 0);
            b.append(String.format(Locale.ROOT, "  %-10s %-24s %4d groups %6d slots%s%n", m.id(), m.address(), groups,
                    groups * dev.ferry.ps.net.RoutingTable.SLOTS_PER_GROUP,
                    s.draining().contains(m.id()) ? "  (leaving)" : ""));
        }
        for (String owner : counts.keySet()) {
            if (!s.members().containsKey(owner) && counts.get(owner) > 0) {
                b.append(String.format(Locale.ROOT, "  %-10s %-24s %4d groups (gone: being reassigned)%n", owner,
                        a.addresses().get(owner), counts.get(owner)));
            }
        }
        Move move = a.move();
        b.append(move == null ? "moves in flight: none" : "moves in flight: " + move.size() + " groups " + move.from()
                + " -> " + move.to() + " (move " + move.id() + ", " + s.moves().getOrDefault(move.id(), "copying") + ")");
        b.append(System.lineSeparator());
        b.append("clients: ").append(s.clientAddress()).append(System.lineSeparator());
        return b.toString();
    }

    private List<String> children(String path) throws Exception {
        try {
            return zk.getChildren().forPath(path);
        } catch (KeeperException.NoNodeException none) {
            return List.of();
        }
    }

    /**
     * Tells {@code listener} each status a move's source reports ({@code ready}, or {@code
     * failed: <reason>}) with the move's id, on ZooKeeper's event thread, until the returned
     * handle is closed. A status the controller deletes before the watch has read it is missed;
     * polling {@link #status()} misses far more (a failed move's status lives until the
     * controller's next pass).
     */
    public AutoCloseable watchMoves(BiConsumer<Long, String> listener) {
        CuratorCache cache = CuratorCache.build(zk, paths.moves);
        String prefix = paths.moves + "/";
        cache.listenable().addListener(CuratorCacheListener.builder().forCreatesAndChanges((before, node) -> {
            long id = node.getPath().startsWith(prefix) ? moveId(node.getPath().substring(prefix.length())) : -1;
            if (id >= 0 && node.getData() != null) {
                listener.accept(id, new String(node.getData(), StandardCharsets.UTF_8));
            }
        }).build());
        cache.start();
        return cache::close;
    }

    /** The move id a child of the moves node is named by, or -1 if its name is not one (a stray node). */
    static long moveId(String name) {
        if (name.isEmpty() || !name.chars().allMatch(c -> c >= '0' && c <= '9')) {
            return -1;
        }
        try {
            return Long.parseLong(name);
        } catch (NumberFormatException tooLong) {
            return -1;
        }
    }

    @Override
    public void close() {
        zk.close();
    }
}
