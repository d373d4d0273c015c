package dev.ferry.cluster;

import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.logging.Logger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

/**
 * The elected controller's reconcile pass: reads the members, the drain requests, the assignment
 * and the status of the move in flight from ZooKeeper, asks the {@link Planner}, and writes the
 * next assignment by compare-and-set fenced by the controller epoch. Stateless between passes
 * but for its epoch: a new controller resumes from what is in ZooKeeper, and a crash loses
 * nothing. Runs on its member's event thread only.
 */
final class Controller {

    private static final Logger LOG = Logger.getLogger(Controller.class.getName());

    private final CuratorFramework zk;
    private final ClusterPaths paths;
    private final ClusterConfig config;
    private final String self;
    private long epoch = -1;
    private int epochVersion = -1;

    Controller(CuratorFramework zk, ClusterPaths paths, ClusterConfig config, String self) {
        this.zk = zk;
        this.paths = paths;
        this.config = config;
        this.self = self;
    }

    /** Takes office: bumps the controller epoch by CAS; from now on every write checks it. */
    void elect() throws Exception {
        while (true) {
            Stat stat = new Stat();
            byte[] data = zk.getData().storingStatIn(stat).forPath(paths.epoch);
            long current = data.length == 0 ? 0 : Long.parseLong(new String(data, StandardCharsets.UTF_8).strip());
            try {
                zk.setData().withVersion(stat.getVersion()).forPath(paths.epoch,
                        Long.toString(current + 1).getBytes(StandardCharsets.UTF_8));
                epoch = current + 1;
                epochVersion = stat.getVersion() + 1;
                LOG.info(() -> "member " + self + " is the controller, epoch " + epoch);
                return;
            } catch (KeeperException.BadVersionException raced) {
                // another controller bumped it meanwhile; read again
            }
        }
    }

    /** Leaves office: no more writes. */
    void resign() {
        epochVersion = -1;
    }

    /** Whether it holds office. */
    boolean active() {
        return epochVersion >= 0;
    }

    /** Its epoch (-1 before election). */
    long epoch() {
        return epoch;
    }

    /**
     * One pass; returns whether it wrote a new assignment.
     *
     * @throws KeeperException.BadVersionException if another writer won (the caller passes again)
     */
    boolean reconcile() throws Exception {
        if (!active()) {
            return false;
        }
        Stat stat = new Stat();
        Assignment current = Assignment.decode(zk.getData().storingStatIn(stat).forPath(paths.assignment));
        // The drain requests before the members: a member that drained deletes its node, then its
        // request (ClusterMember#close), and this session reads in order, so a request found gone
        // means the member node is gone too; never a leaver seen live and not leaving.
        Set<String> draining = new HashSet<>(zk.getChildren().forPath(paths.drain));
        Map<String, String> live = liveMembers();
        Assignment next = current;
        Move move = current.move();
        if (move != null && live.containsKey(move.from()) && live.containsKey(move.to())) {
            String status = moveStatus(move.id());
            if (status != null && status.equals("ready")) {
                next = Planner.flip(current, epoch);
            } else if (status != null && status.startsWith("failed")) {
                LOG.warning(() -> "move " + move + " failed: " + status + "; cancelled");
                next = Planner.cancel(current, epoch);
            }
        }
        List<String> reports = List.of();
        if (next == current) {
            reports = zk.getChildren().forPath(paths.outOfSync);
            Map<String, Map<Integer, Long>> outOfSync = outOfSync(reports);
            Planner.Plan plan = Planner.plan(current, live, draining, config.maxGroupsPerMove(), epoch,
                    config.replicationFactor(), outOfSync);
            next = plan.next();
            if (next.move() == null && !plan.moves().isEmpty()) {
                next = Planner.start(next, plan.moves().get(0), epoch);
            }
        }
        if (next == current) {
            deleteReports(reports);
            return false;
        }
        zk.transaction().forOperations(
                zk.transactionOp().check().withVersion(epochVersion).forPath(paths.epoch),
                zk.transactionOp().setData().withVersion(stat.getVersion()).forPath(paths.assignment, next.encode()));
        deleteReports(reports);
        Assignment written = next;
        LOG.fine(() -> "controller " + self + " wrote generation " + written.generation() + " move " + written.move());
        if (move != null && (next.move() == null || next.move().id() != move.id())) {
            try {
                zk.delete().forPath(paths.move(move.id()));
            } catch (KeeperException.NoNodeException gone) {
                // never reported
            }
        }
        return true;
    }

    /** The backups reported out of sync: member to group to the epoch of the report. */
    private Map<String, Map<Integer, Long>> outOfSync(List<String> reports) throws Exception {
        Map<String, Map<Integer, Long>> lost = new TreeMap<>();
        for (String r : reports) {
            byte[] data;
            try {
                data = zk.getData().forPath(paths.outOfSync + "/" + r);
            } catch (KeeperException.NoNodeException gone) {
                continue;
            }
            String[] lines = new String(data, StandardCharsets.UTF_8).split("\n");
            Map<Integer, Long> groups = lost.computeIfAbsent(lines[0], m -> new TreeMap<>());
            for (int i = 1; i < lines.length; i++) {
                String[] ge = lines[i].split(" ");
                if (ge.length == 2) {
                    groups.put(Integer.parseInt(ge[0]), Long.parseLong(ge[1]));
                }
            }
        }
        return lost;
    }

    /** Deletes reports acted on (a report whose epoch is stale needs no action either). */
    private void deleteReports(List<String> reports) throws Exception {
        for (String r : reports) {
            try {
                zk.delete().forPath(paths.outOfSync + "/" + r);
            } catch (KeeperException.NoNodeException gone) {
                // deleted by an earlier controller
            }
        }
    }

    private Map<String, String> liveMembers() throws Exception {
        Map<String, String> live = new TreeMap<>();
        List<String> ids = zk.getChildren().forPath(paths.members);
        for (String id : ids) {
            try {
                live.put(id, MemberInfo.decode(zk.getData().forPath(paths.member(id))).address());
            } catch (KeeperException.NoNodeException expired) {
                // gone between the listing and the read
            }
        }
        return live;
    }

    private String moveStatus(long id) throws Exception {
        try {
            return new String(zk.getData().forPath(paths.move(id)), StandardCharsets.UTF_8);
        } catch (KeeperException.NoNodeException none) {
            return null;
        }
    }
}
