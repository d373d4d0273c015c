package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

import dev.ferry.ps.PsException;
import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcClient;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.rpc.RpcMethod;
import dev.ferry.rpc.RpcResponse;
import dev.ferry.transport.TransportConfig;

/**
 * The primary's round trip to the backups of a push ({@link Replicator}): one request per
 * in-sync backup of the push's groups, sent at once; each answer awaited within the replication
 * timeout ({@code BEHIND} resent after 1 ms); a backup lost meanwhile (no answer, unreachable,
 * not in sync) reported ({@link InSyncReporter}) and waited out until the table installed here no
 * longer lists it; a {@code FENCED} answer fails the push with {@code WRONG_SERVER}. The caller
 * holds the groups' locks. Thread-safe.
 */
final class BackupCalls implements AutoCloseable {

    /** Writes one backup's request body: the push's part in {@code groups} (sorted), at {@code epochs}. */
    @FunctionalInterface
    interface Body {
        byte[] write(PsServer.View v, int backup, int[] groups, long[] epochs);
    }

    private static final long PAUSE_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

    private final PsServer server;
    private final RpcConfig config;
    private final Supplier<TransportConfig> transport;
    private volatile long timeoutMillis = 1_000;
    private volatile InSyncReporter reporter = (backup, groups, epochs) -> { };
    private RpcClient peers;

    BackupCalls(PsServer server, RpcConfig config, Supplier<TransportConfig> transport) {
        this.server = server;
        this.config = config;
        this.transport = transport;
    }

    /** Sets the replication timeout and where lost backups are reported. */
    void configure(long timeoutMillis, InSyncReporter reporter) {
        if (timeoutMillis < 1) {
            throw new IllegalArgumentException("replication timeout must be >= 1 ms: " + timeoutMillis);
        }
        this.timeoutMillis = timeoutMillis;
        this.reporter = Objects.requireNonNull(reporter, "reporter");
    }

    /** One backup's share of a push: its server index, its groups, the request, the call in flight. */
    private static final class Share {
        final int backup;
        final String member;
        final String address;
        final int[] groups;
        final long[] epochs;
        final RpcMethod method;
        final byte[] body;
        CompletableFuture<RpcResponse> call;

        Share(int backup, String member, String address, int[] groups, long[] epochs, RpcMethod method, byte[] body) {
            this.backup = backup;
            this.member = member;
            this.address = address;
            this.groups = groups;
            this.epochs = epochs;
            this.method = method;
            this.body = body;
        }
    }

    /**
     * Sends {@code method} with each backup's {@code body} to every in-sync backup of groups
     * {@code gs[0, groups)} in view {@code v}; returns once each applied it or was taken out of
     * the in-sync set.
     *
     * @throws PsException {@code WRONG_SERVER} if a backup fenced this server out or a group
     *                     changed primary meanwhile; {@code CLOSED} or {@code NOT_ENOUGH_REPLICAS}
     *                     as {@link #awaitRemoved}
     */
    void replicate(PsServer.View v, long deadline, int[] gs, int groups, RpcMethod method, Body body) {
        Replicas replicas = v.replicas();
        List<Share> shares = null;
        for (int i = 0; i < groups; i++) {
            int g = gs[i];
            for (int b = 0; b < replicas.backupCount(g); b++) {
                int backup = replicas.backup(g, b);
                boolean seen = false;
                if (shares != null) {
                    for (Share sh : shares) {
                        seen |= sh.backup == backup;
                    }
                }
                if (!seen) {
                    if (shares == null) {
                        shares = new ArrayList<>(2);
                    }
                    shares.add(share(v, backup, gs, groups, method, body));
                }
            }
        }
        if (shares == null) {
            return;
        }
        for (Share sh : shares) {
            send(sh, deadline);
        }
        List<Share> lost = null;
        long until = Math.min(deadline, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis));
        for (Share sh : shares) {
            if (!await(sh, v, until)) {
                if (lost == null) {
                    lost = new ArrayList<>(1);
                }
                lost.add(sh);
            }
        }
        if (lost != null) {
            for (Share sh : lost) {
                reporter.outOfSync(sh.member, sh.groups, sh.epochs);
            }
            awaitRemoved(v, lost, deadline);
        }
    }

    /** The request for {@code backup}: the push's part in the groups of {@code gs} that it backs up. */
    private static Share share(PsServer.View v, int backup, int[] gs, int groups, RpcMethod method, Body body) {
        Replicas replicas = v.replicas();
        int m = 0;
        for (int i = 0; i < groups; i++) {
            m += replicas.isBackup(gs[i], backup) ? 1 : 0;
        }
        int[] its = new int[m];
        long[] epochs = new long[m];
        m = 0;
        for (int i = 0; i < groups; i++) {
            if (replicas.isBackup(gs[i], backup)) {
                its[m] = gs[i];
                epochs[m++] = replicas.epoch(gs[i]);
            }
        }
        return new Share(backup, v.table().members().get(backup), v.table().addresses().get(backup), its, epochs,
                method, body.write(v, backup, its, epochs));
    }

    private void send(Share sh, long deadline) {
        long millis = Math.max(1, Math.min(timeoutMillis, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
        byte[] body = sh.body;
        sh.call = channel(sh.address).call(sh.method, body.length,
                segment -> MemorySegment.copy(MemorySegment.ofArray(body), 0, segment, 0, body.length), millis);
    }

    /**
     * Waits for one backup within the replication timeout, trying again while it is behind.
     *
     * @return true if it applied the rows, false if it is lost (no answer in time, unreachable, or
     *         not in sync)
     * @throws PsException {@code WRONG_SERVER} if it fenced this server out
     */
    private boolean await(Share sh, PsServer.View v, long until) {
        while (true) {
            int status;
            try {
                long wait = Math.max(1, TimeUnit.NANOSECONDS.toMillis(until - System.nanoTime()));
                RpcResponse response = sh.call.get(wait, TimeUnit.MILLISECONDS);
                try {
                    status = ReplicationDescriptor.status(response.segment());
                } finally {
                    response.release();
                }
            } catch (TimeoutException | ExecutionException e) {
                sh.call.cancel(false);
                return false;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new PsException(PsException.Code.CLOSED, "interrupted while replicating a push");
            }
            switch (status) {
                case ReplicationDescriptor.APPLIED:
                    return true;
                case ReplicationDescriptor.FENCED:
                    throw PsDescriptor.wrongServer(v.generation(), "backup " + sh.member + " knows a newer epoch of "
                            + "these groups: this server is no longer their primary; the push was not acknowledged");
                case ReplicationDescriptor.NOT_IN_SYNC:
                    return false;
                default:
                    if (System.nanoTime() + PAUSE_NANOS > until) {
                        return false;
                    }
                    java.util.concurrent.locks.LockSupport.parkNanos(PAUSE_NANOS);
                    send(sh, until);
            }
        }
    }

    /**
     * Waits until the table installed here no longer lists the lost backups for their groups.
     *
     * @throws PsException {@code WRONG_SERVER} if a group changed primary meanwhile, {@code CLOSED}
     *                     if the controller did not act in time, {@code NOT_ENOUGH_REPLICAS} if
     *                     too few copies remain (the push was applied, not acknowledged)
     */
    private void awaitRemoved(PsServer.View before, List<Share> lost, long deadline) {
        while (true) {
            PsServer.View now = server.view();
            Replicas r = now.replicas();
            boolean removed = r != null;
            for (Share sh : lost) {
                for (int i = 0; removed && i < sh.groups.length; i++) {
                    int g = sh.groups[i];
                    if (r.epoch(g) != sh.epochs[i] || now.table().ownerOfGroup(g) != now.self()) {
                        throw PsDescriptor.wrongServer(now.generation(), "group " + g + " changed primary while its "
                                + "backup " + sh.member + " was lost; the push was not acknowledged");
                    }
                    int index = now.table().indexOf(sh.member);
                    removed = index < 0 || !r.isBackup(g, index);
                    if (removed && 1 + r.backupCount(g) < r.minInSync()) {
                        throw new PsException(PsException.Code.NOT_ENOUGH_REPLICAS, "group " + g + " is down to "
                                + (1 + r.backupCount(g)) + " in-sync copies after losing " + sh.member
                                + "; the push was applied here but not acknowledged");
                    }
                }
            }
            if (removed) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new PsException(PsException.Code.CLOSED, "backup " + lost.get(0).member + " did not answer and "
                        + "the controller did not take it out of the in-sync set in time; the push was applied here "
                        + "but not acknowledged");
            }
            java.util.concurrent.locks.LockSupport.parkNanos(PAUSE_NANOS);
        }
    }

    private synchronized RpcChannel channel(String address) {
        if (peers == null) {
            TransportConfig t = transport.get();
            if (t == null) {
                throw new IllegalStateException("the server listens on no transport");
            }
            peers = RpcClient.open(config, t);
        }
        return peers.channel(address);
    }

    @Override
    public synchronized void close() {
        if (peers != null) {
            peers.close();
            peers = null;
        }
    }
}
