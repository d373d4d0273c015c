package dev.ferry.cluster;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.logging.Level;
import java.util.logging.Logger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.nodes.PersistentNode;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;

import dev.ferry.ps.PsException;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.PsDescriptor;
import dev.ferry.ps.net.PsServer;

/**
 * One parameter server's membership of a cluster: its ephemeral member node, its part in the
 * controller election, and the reactions to each new assignment (install the routing table into
 * the {@link PsServer}, run the moves it is the source of, end the moves that are over). The one
 * Curator client of the process: it owns the Curator recipes and closes them before the client.
 *
 * <p>Threads: every reaction and every controller pass runs on one event thread (Curator's events
 * are only handed to it); a move's copy runs on a mover thread, so that new tables keep being
 * installed meanwhile. Nothing here is on the data path: requests never wait on ZooKeeper.
 */
public final class ClusterMember implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(ClusterMember.class.getName());

    private final ClusterConfig config;
    private final ClusterPaths paths;
    private final MemberInfo info;
    private final PsServer server;
    private final java.nio.file.Path checkpointRoot;
    private final CuratorFramework zk;
    private final ScheduledExecutorService events;
    private final ExecutorService mover;
    private final AtomicBoolean pending = new AtomicBoolean();
    /** Bumped by each connection change: a pending read cut-off of an earlier suspension is void. */
    private final java.util.concurrent.atomic.AtomicLong cuts = new java.util.concurrent.atomic.AtomicLong();
    private final CompletableFuture<Void> drained = new CompletableFuture<>();
    private final Controller controller;
    private PersistentNode node;
    private CuratorCache cache;
    private LeaderLatch latch;
    /** Event thread only: the move last seen in the assignment, and the one started here. */
    private long lastMove = -1;
    private long startedMove = -1;
    private volatile Assignment assignment;
    private volatile boolean draining;

    private ClusterMember(ClusterConfig config, MemberInfo info, PsServer server, java.nio.file.Path checkpointRoot) {
        this.config = config;
        this.paths = new ClusterPaths(config);
        this.info = info;
        this.server = server;
        this.checkpointRoot = checkpointRoot;
        this.zk = client(config);
        this.events = Executors.newSingleThreadScheduledExecutor(Thread.ofPlatform().daemon()
                .name("ferry-cluster-" + info.id()).factory());
        this.mover = Executors.newSingleThreadExecutor(Thread.ofPlatform().daemon()
                .name("ferry-cluster-move-" + info.id()).factory());
        this.controller = new Controller(zk, paths, config, info.id());
    }

    /** A started Curator client for {@code config}; the caller closes it. */
    static CuratorFramework client(ClusterConfig config) {
        return CuratorFrameworkFactory.builder().connectString(config.connectString())
                .sessionTimeoutMs(config.sessionTimeoutMillis()).connectionTimeoutMs(config.connectionTimeoutMillis())
                .retryPolicy(new ExponentialBackoffRetry(100, 5, 2_000)).build();
    }

    /** Creates the cluster's znodes that do not exist yet (idempotent). */
    static void ensureLayout(CuratorFramework zk, ClusterPaths paths) throws Exception {
        for (String p : new String[] {paths.members, paths.moves, paths.drain, paths.tables, paths.outOfSync}) {
            try {
                zk.create().creatingParentsIfNeeded().forPath(p);
            } catch (KeeperException.NodeExistsException exists) {
                // made by another member
            }
        }
        createIfAbsent(zk, paths.epoch, "0".getBytes(StandardCharsets.UTF_8));
        createIfAbsent(zk, paths.assignment, Assignment.empty().encode());
    }

    private static void createIfAbsent(CuratorFramework zk, String path, byte[] data) throws Exception {
        try {
            zk.create().creatingParentsIfNeeded().forPath(path, data);
        } catch (KeeperException.NodeExistsException exists) {
            // made by another member
        }
    }

    /**
     * Joins the cluster: connects, registers the member node, takes part in the election, and
     * from then on keeps {@code server}'s routing table current. Returns once connected and
     * registered.
     *
     * @throws IllegalStateException if ZooKeeper cannot be reached within the connection timeout
     */
    public static ClusterMember join(ClusterConfig config, MemberInfo info, PsServer server) {
        return join(config, info, server, null);
    }

    /**
     * {@link #join(ClusterConfig, MemberInfo, PsServer)}, where every member checkpoints into
     * {@code checkpointRoot/<its id>}: groups this member gets because their owner died are
     * restored from that owner's newest checkpoint there before it serves them (null: they
     * restart from their initial values).
     */
    public static ClusterMember join(ClusterConfig config, MemberInfo info, PsServer server,
            java.nio.file.Path checkpointRoot) {
        ClusterMember member = new ClusterMember(config, info, server, checkpointRoot);
        try {
            member.start();
            return member;
        } catch (Exception e) {
            member.close();
            throw new IllegalStateException("member " + info.id() + " could not join " + config.uri() + ": " + e, e);
        }
    }

    private void start() throws Exception {
        zk.start();
        if (!zk.blockUntilConnected(config.connectionTimeoutMillis(), TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("no ZooKeeper at " + config.connectString() + " within "
                    + config.connectionTimeoutMillis() + " ms");
        }
        ensureLayout(zk, paths);
        server.onTableCreated(this::recordTable);
        server.replication(config.replicationTimeoutMillis(), this::reportOutOfSync);
        if (config.cutOffGraceMillis() > 0) {
            zk.getConnectionStateListenable().addListener((client, state) -> cutOff(state));
        }
        cache = CuratorCache.build(zk, paths.root);
        cache.listenable().addListener(CuratorCacheListener.builder()
                .forAll((type, before, after) -> poke())
                .forInitialized(this::poke).build());
        cache.start();
        node = new PersistentNode(zk, CreateMode.EPHEMERAL, false, paths.member(info.id()), info.encode());
        node.start();
        if (!node.waitForInitialCreate(config.connectionTimeoutMillis(), TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("member node " + paths.member(info.id()) + " not created in time");
        }
        latch = new LeaderLatch(zk, paths.latch, info.id());
        latch.addListener(new LeaderLatchListener() {
            @Override
            public void isLeader() {
                events.execute(() -> {
                    try {
                        controller.elect();
                    } catch (Exception e) {
                        LOG.log(Level.WARNING, "member " + info.id() + " could not take office", e);
                    }
                    react();
                });
            }

            @Override
            public void notLeader() {
                events.execute(controller::resign);
            }
        });
        latch.start();
        // A safety net for missed or failed passes (a lost CAS race is retried here too).
        events.scheduleWithFixedDelay(this::poke, 250, 250, TimeUnit.MILLISECONDS);
    }

    /** Curator's thread: suspended or lost closes the server's gate (reads after the grace); back opens it. */
    private void cutOff(org.apache.curator.framework.state.ConnectionState state) {
        dev.ferry.ps.net.ServingGate gate = server.gate();
        long cut = cuts.incrementAndGet();
        switch (state) {
            case SUSPENDED, LOST -> {
                gate.stopPushes();
                LOG.warning(() -> "member " + info.id() + ": ZooKeeper connection " + state + "; pushes refused, pulls"
                        + " refused in " + config.cutOffGraceMillis() + " ms");
                try {
                    events.schedule(() -> {
                        if (cuts.get() == cut) {
                            gate.stopReads();
                            LOG.warning(() -> "member " + info.id() + ": still cut off; pulls refused");
                        }
                    }, config.cutOffGraceMillis(), TimeUnit.MILLISECONDS);
                } catch (java.util.concurrent.RejectedExecutionException closed) {
                    gate.stopReads();
                }
            }
            case CONNECTED, RECONNECTED -> {
                gate.open();
                LOG.info(() -> "member " + info.id() + ": ZooKeeper connection " + state + "; serving again");
            }
            default -> {
                // READ_ONLY: not used
            }
        }
    }

    /** Its member id. */
    public String id() {
        return info.id();
    }

    /** The assignment last installed (null before the first). */
    public Assignment assignment() {
        return assignment;
    }

    /** Whether this member is the controller now. */
    public boolean isController() {
        return controller.active() && latch != null && latch.hasLeadership();
    }

    /**
     * Asks to leave cleanly: the controller moves every group away. The future completes when
     * this member owns nothing and no move involves it; then {@link #close} it.
     */
    public CompletableFuture<Void> drain() {
        draining = true;
        try {
            createIfAbsent(zk, paths.drain(info.id()), new byte[0]);
        } catch (Exception e) {
            drained.completeExceptionally(e);
        }
        poke();
        return drained;
    }

    /** Whether an operator asked this member to leave (a drain node exists for it). */
    public boolean drainRequested() {
        return draining || cache != null && cache.get(paths.drain(info.id())).isPresent();
    }

    /** Schedules one reaction on the event thread (coalesced). */
    private void poke() {
        if (pending.compareAndSet(false, true)) {
            try {
                events.execute(() -> {
                    pending.set(false);
                    react();
                });
            } catch (java.util.concurrent.RejectedExecutionException closed) {
                pending.set(false);
            }
        }
    }

    private void react() {
        try {
            Optional<ChildData> data = cache.get(paths.assignment);
            if (data.isPresent() && data.get().getData() != null && data.get().getData().length > 0) {
                Assignment a = Assignment.decode(data.get().getData());
                if (assignment == null || a.generation() > assignment.generation()) {
                    assignment = a;
                    if (!a.addresses().isEmpty()) {
                        restoreOrphans(a);
                        server.install(a.routingTable(), a.replicas(config.minInSync()));
                    }
                    followMoves(a);
                }
            }
            createMissingTables();
            Assignment a = assignment;
            if (draining && a != null && a.groupCount(info.id()) == 0 && (a.move() == null
                    || !a.move().from().equals(info.id()) && !a.move().to().equals(info.id()))) {
                drained.complete(null);
            }
            if (controller.active() && latch.hasLeadership() && controller.reconcile()) {
                poke();
            }
        } catch (KeeperException.BadVersionException raced) {
            poke();
        } catch (Exception e) {
            LOG.log(Level.FINE, "member " + info.id() + ": reaction failed; retried", e);
        }
    }

    /** Event thread: starts the move this member is the source of, ends the ones that are over. */
    private void followMoves(Assignment a) {
        Move move = a.move();
        if (lastMove >= 0 && (move == null || move.id() != lastMove)) {
            server.endMove(lastMove);
        }
        lastMove = move == null ? -1 : move.id();
        if (move != null && move.from().equals(info.id()) && startedMove != move.id()) {
            startedMove = move.id();
            String target = a.addresses().get(move.to());
            mover.execute(() -> runMove(move, target));
        }
    }

    private void runMove(Move move, String target) {
        String status;
        long start = System.nanoTime();
        try {
            server.moveOut(move.id(), move.groups(), target, move.copy());
            status = "ready";
            LOG.info(() -> "member " + info.id() + ": " + move + " copied in "
                    + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) + " ms");
        } catch (RuntimeException e) {
            status = "failed: " + e.getMessage();
            LOG.log(Level.WARNING, "member " + info.id() + ": " + move + " failed", e);
        }
        try {
            zk.create().orSetData().creatingParentsIfNeeded().forPath(paths.move(move.id()),
                    status.getBytes(StandardCharsets.UTF_8));
        } catch (Exception e) {
            LOG.log(Level.WARNING, "member " + info.id() + ": could not report " + move, e);
        }
    }

    /**
     * Event thread, before {@code a} is installed: the groups {@code a} gives this member because
     * their owner died get their rows from that owner's newest checkpoint (stale rows of earlier
     * ownership reset first). Nothing is served from them before.
     */
    private void restoreOrphans(Assignment a) {
        dev.ferry.ps.net.RoutingTable current = server.routingTable();
        int self = server.index();
        java.util.Map<String, boolean[]> byOwner = new java.util.TreeMap<>();
        a.restoreFrom().forEach((g, dead) -> {
            boolean mineNow = current != null && self >= 0 && current.ownerOfGroup(g) == self;
            if (info.id().equals(a.owner(g)) && !mineNow) {
                byOwner.computeIfAbsent(dead, d -> new boolean[dev.ferry.ps.net.RoutingTable.GROUPS])[g] = true;
            }
        });
        byOwner.forEach((dead, groups) -> {
            java.util.function.LongPredicate inGroups = id -> groups[dev.ferry.ps.net.RoutingTable.groupOf(id)];
            dev.ferry.ps.ParameterServer ps = server.parameterServer();
            for (var stats : ps.stats()) {
                try {
                    dev.ferry.ps.RowTransfer.reset(ps.table(stats.name()), inGroups);
                } catch (PsException dense) {
                    // A dense tensor of those groups: a stale copy from an earlier ownership goes.
                    if (groups[denseGroup(stats.name())]) {
                        ps.dropDense(stats.name());
                    }
                }
            }
            java.nio.file.Path dir = checkpointRoot == null ? null : checkpointRoot.resolve(dead);
            if (dir == null || !java.nio.file.Files.isDirectory(dir)) {
                LOG.warning(() -> "member " + info.id() + ": groups of " + dead + " restart from their initial values"
                        + " (no checkpoint directory " + dir + ")");
                return;
            }
            long start = System.nanoTime();
            long[] rows = {0};
            try (dev.ferry.ps.ParameterServer restored = dev.ferry.ps.ParameterServer.open(
                    dev.ferry.ps.PsConfig.defaults(), dir)) {
                for (var stats : restored.stats()) {
                    dev.ferry.ps.SparseTable from;
                    try {
                        from = restored.table(stats.name());
                    } catch (PsException dense) {
                        if (groups[denseGroup(stats.name())]) {
                            restoreDense(restored.dense(stats.name()), ps);
                            rows[0]++;
                        }
                        continue;
                    }
                    dev.ferry.ps.SparseTable to;
                    try {
                        to = ps.table(stats.name());
                    } catch (PsException unknown) {
                        to = ps.createTable(from.config());
                    }
                    dev.ferry.ps.SparseTable target = to;
                    dev.ferry.ps.RowTransfer.export(from, inGroups, 1 << 20,
                            run -> rows[0] += dev.ferry.ps.RowTransfer.merge(target, run));
                }
                String source = restored.restoredFrom().map(Object::toString).orElse("no checkpoint");
                LOG.info(() -> "member " + info.id() + ": restored " + rows[0] + " rows of " + dead + "'s groups from "
                        + source + " in " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) + " ms");
            } catch (RuntimeException e) {
                LOG.log(Level.WARNING, "member " + info.id() + ": could not restore the groups of " + dead
                        + " from " + dir + "; they restart from their initial values", e);
            }
        });
    }

    /** The slot group of dense tensor {@code name}. */
    private static int denseGroup(String name) {
        return dev.ferry.ps.net.RoutingTable.groupOf(PsDescriptor.denseKey(name));
    }

    /** A dead owner's dense tensor from its checkpoint, whole row (weights, state, steps), into {@code ps}. */
    private static void restoreDense(dev.ferry.ps.DenseTensor from, dev.ferry.ps.ParameterServer ps) {
        dev.ferry.ps.DenseTensor to;
        try {
            to = ps.createDense(from.config());
        } catch (PsException exists) {
            to = ps.dense(from.config().name()); // not dropped above: a sparse table of that name says so
        }
        MemorySegment row = MemorySegment.ofArray(new long[(int) ((dev.ferry.ps.DenseTransfer.rowBytes(from) + 7) / 8)])
                .asSlice(0, dev.ferry.ps.DenseTransfer.rowBytes(from));
        dev.ferry.ps.DenseTransfer.copy(from, row);
        dev.ferry.ps.DenseTransfer.merge(to, row, true);
    }

    /**
     * Handler thread: a backup of groups this member is the primary of did not answer in time;
     * the controller takes it out of their in-sync sets (the push waits for that table).
     */
    private void reportOutOfSync(String backup, int[] groups, long[] epochs) {
        StringBuilder text = new StringBuilder(backup);
        for (int i = 0; i < groups.length; i++) {
            text.append('\n').append(groups[i]).append(' ').append(epochs[i]);
        }
        try {
            zk.create().withMode(CreateMode.PERSISTENT_SEQUENTIAL).forPath(paths.outOfSync + "/r-",
                    text.toString().getBytes(StandardCharsets.UTF_8));
            LOG.info(() -> "member " + info.id() + ": backup " + backup + " lost for " + groups.length + " groups");
        } catch (Exception e) {
            LOG.log(Level.WARNING, "member " + info.id() + ": could not report backup " + backup + " out of sync", e);
        }
    }

    /** Handler thread: a client created a table here; record it for members that join later. */
    private void recordTable(TableConfig table) {
        byte[] name = PsDescriptor.nameBytes(table.name());
        byte[] body = new byte[PsDescriptor.createBytes(name.length)];
        PsDescriptor.writeCreate(MemorySegment.ofArray(body), name, table);
        try {
            createIfAbsent(zk, paths.table(table.name()), body);
        } catch (Exception e) {
            LOG.log(Level.WARNING, "member " + info.id() + ": could not record table " + table.name(), e);
        }
    }

    private void createMissingTables() {
        cache.stream().filter(d -> d.getPath().startsWith(paths.tables + "/")).forEach(d -> {
            TableConfig table = PsDescriptor.readTable(MemorySegment.ofArray(d.getData()));
            try {
                server.parameterServer().table(table.name());
            } catch (PsException unknown) {
                try {
                    server.parameterServer().createTable(table);
                } catch (PsException exists) {
                    if (exists.code() != PsException.Code.TABLE_EXISTS) {
                        LOG.log(Level.WARNING, "member " + info.id() + ": table " + table.name(), exists);
                    }
                }
            }
        });
    }

    /**
     * Leaves: the member node goes at once (no session timeout to wait for), then a drained
     * member's drain request. The server stays open.
     */
    @Override
    public void close() {
        events.shutdownNow();
        mover.shutdownNow();
        try {
            if (latch != null) {
                latch.close();
            }
        } catch (Exception e) {
            LOG.log(Level.FINE, "closing the latch", e);
        }
        if (cache != null) {
            cache.close();
        }
        // The member node before the drain request: the other way round, a controller that read
        // the members in between saw this member live and no longer leaving, and planned a move of
        // groups to it as it exited; the pushes to those groups then waited on forwards to a
        // closed server. The controller reads the drain requests first (Controller#reconcile).
        try {
            if (node != null) {
                node.close();
            }
        } catch (Exception e) {
            LOG.log(Level.FINE, "closing the member node", e);
        }
        try {
            if (draining && drained.isDone()) {
                zk.delete().forPath(paths.drain(info.id()));
            }
        } catch (Exception e) {
            LOG.log(Level.FINE, "deleting the drain request", e);
        }
        zk.close();
    }
}
