package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;
import java.util.function.Consumer;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.DenseTensor;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.TableStats;
import dev.ferry.rpc.ServerCall;

/**
 * The management side of a {@link PsServer}: the handlers of {@code CREATE_TABLE},
 * {@code DESCRIBE}, {@code SLOT_TABLE}, {@code ROUTING} and {@code CHECKPOINT}. A cluster member
 * takes the creation of a table it already has, with the same configuration, as no error: the
 * members copy tables from each other, and a client retries a creation whose answer it lost.
 */
final class AdminHandlers {

    private final ParameterServer ps;
    private final PsServer server;
    private final MoveSource moveSource;
    private final Replicator replicator;
    private final Path checkpointDirectory;
    private volatile Consumer<TableConfig> onTableCreated = config -> { };

    AdminHandlers(ParameterServer ps, PsServer server, MoveSource moveSource, Replicator replicator,
            Path checkpointDirectory) {
        this.ps = ps;
        this.server = server;
        this.moveSource = moveSource;
        this.replicator = replicator;
        this.checkpointDirectory = checkpointDirectory;
    }

    /** See {@link PsServer#onTableCreated}. */
    void onTableCreated(Consumer<TableConfig> listener) {
        this.onTableCreated = Objects.requireNonNull(listener, "listener");
    }

    void create(ServerCall call) {
        MemorySegment body = call.request();
        PsDescriptor.checkHeader(body);
        boolean member = server.memberId() != null;
        if (PsDescriptor.kind(body) == PsDescriptor.DENSE) {
            DenseConfig config = PsDescriptor.readDense(body);
            moveSource.barrier.readLock().lock();
            try {
                PsServer.View v = checkDenseOwner(config.name());
                DenseTensor tensor;
                try {
                    tensor = ps.createDense(config);
                } catch (PsException e) {
                    if (!member || e.code() != PsException.Code.TABLE_EXISTS || !sameDense(config)) {
                        throw e;
                    }
                    // A client's retry after a lost answer (its creation may not have reached the backups).
                    tensor = ps.dense(config.name());
                }
                moveSource.createdDense(tensor, call.remainingMillis());
                if (v.replicas() != null) {
                    replicator.createdDense(v, tensor, call.remainingMillis());
                }
            } finally {
                moveSource.barrier.readLock().unlock();
            }
        } else if (PsDescriptor.kind(body) == PsDescriptor.SPARSE) {
            TableConfig config = PsDescriptor.readTable(body);
            if (member && sameTable(config)) {
                return; // a cluster's members copy tables from each other: the same one again is no error
            }
            try {
                ps.createTable(config);
            } catch (PsException e) {
                if (member && e.code() == PsException.Code.TABLE_EXISTS && sameTable(config)) {
                    return; // copied from another member meanwhile
                }
                throw e;
            }
            onTableCreated.accept(config);
        } else {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "unknown table kind " + PsDescriptor.kind(body));
        }
    }

    void describe(ServerCall call) {
        MemorySegment body = call.request();
        PsDescriptor.checkHeader(body);
        String only = PsDescriptor.nameLength(body) == 0 ? null : PsDescriptor.name(body);
        List<TableStats> stats = only == null ? ps.stats() : List.of(ps.describe(only));
        int bytes = PsDescriptor.SERVER_INFO;
        for (TableStats s : stats) {
            bytes += DescribeDescriptor.tableInfoBytes(s.name().getBytes(StandardCharsets.UTF_8).length);
        }
        MemorySegment out = call.reply(bytes);
        List<ServerInfo.Table> tables = stats.stream().map(s -> isDense(s.name()) ? new ServerInfo.Table(true, s)
                : new ServerInfo.Table(false, s, ps.table(s.name()).config().pullFormat())).toList();
        PsServer.View v = server.view();
        int servers = v.table() == null ? 0 : v.table().serverCount();
        int hash = v.table() == null ? 0 : v.table().slots().hashCode();
        int at = DescribeDescriptor.writeServerInfo(out,
                new ServerInfo(null, v.self(), servers, ps.readOnly(), hash, tables), hash);
        for (ServerInfo.Table t : tables) {
            at = DescribeDescriptor.writeTableInfo(out, at, t.dense() ? PsDescriptor.DENSE : PsDescriptor.SPARSE, t.stats(),
                    t.pullFormat());
        }
    }

    void slotTable(ServerCall call) {
        PsServer.View v = server.view();
        if (v.table() == null) {
            throw PsDescriptor.wrongServer(v.generation(), "member " + server.memberId() + " has no routing table yet");
        }
        DescribeDescriptor.writeSlotTable(call.reply(DescribeDescriptor.slotTableBytes()), v.table().slots());
    }

    void routing(ServerCall call) {
        PsServer.View v = server.view();
        if (v.table() == null) {
            throw PsDescriptor.wrongServer(v.generation(), "member " + server.memberId() + " has no routing table yet");
        }
        int bytes = v.table().wireBytes();
        MemorySegment out = call.reply(bytes + PsDescriptor.LIMITS);
        v.table().write(out);
        out.set(PsDescriptor.INT, bytes, ps.config().maxIdsPerRequest());
        out.set(PsDescriptor.INT, bytes + 4, 0);
        out.set(PsDescriptor.LONG, bytes + 8, ps.config().maxRequestBytes());
    }

    void checkpoint(ServerCall call) {
        if (checkpointDirectory == null) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "server " + server.view().self()
                    + " was started without a checkpoint directory");
        }
        byte[] path = ps.checkpoint(checkpointDirectory).toString().getBytes(StandardCharsets.UTF_8);
        MemorySegment.copy(path, 0, call.reply(path.length), ValueLayout.JAVA_BYTE, 0, path.length);
    }

    private boolean sameTable(TableConfig config) {
        try {
            return ps.table(config.name()).config().equals(config);
        } catch (PsException unknown) {
            return false;
        }
    }

    private boolean sameDense(DenseConfig config) {
        try {
            return ps.dense(config.name()).config().equals(config);
        } catch (PsException unknown) {
            return false;
        }
    }

    private boolean isDense(String name) {
        try {
            ps.dense(name);
            return true;
        } catch (PsException e) {
            return false;
        }
    }

    private PsServer.View checkDenseOwner(String name) {
        PsServer.View v = server.view();
        int owner = v.table() == null ? -1 : v.table().slots().serverOf(PsDescriptor.denseKey(name));
        if (owner != v.self() || owner < 0) {
            throw PsDescriptor.wrongServer(v.generation(), "dense tensor '" + name + "' belongs to server "
                    + owner + ", not " + v.self());
        }
        return v;
    }
}
