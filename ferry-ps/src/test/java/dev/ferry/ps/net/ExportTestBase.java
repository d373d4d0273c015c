package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.ferry.ps.ExportLog;
import dev.ferry.ps.ExportRows;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableConfig;
import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcClient;
import dev.ferry.rpc.RpcResponse;

/**
 * A training server, a serving server and a follower in one process (on tcp unless a test names
 * another provider), and row comparisons.
 */
abstract class ExportTestBase extends PsNetTestBase {

    static final int DIM = 4;

    @TempDir
    Path dir;

    record Training(ParameterServer ps, PsServer server, String address, ExportService export) {
    }

    Training training(ParameterServer ps, Path checkpoints) {
        return training(ps, checkpoints, "tcp");
    }

    Training training(ParameterServer ps, Path checkpoints, String provider) {
        PsServer server = PsServer.open(ps, 0, 1, checkpoints, rpc());
        ExportService export = ExportService.attach(server);
        String address = server.listen(config(provider));
        track(ps, server);
        return new Training(ps, server, address, export);
    }

    Training training(Path checkpoints) {
        return training(ParameterServer.create(PsConfig.defaults()), checkpoints);
    }

    record Serving(ParameterServer ps, PsServer server, String address) {
    }

    Serving serving() {
        return serving("tcp");
    }

    Serving serving(String provider) {
        ParameterServer ps = ParameterServer.follower(PsConfig.defaults());
        PsServer server = PsServer.openMember(ps, "s", null, rpc(), false);
        String address = server.listen(config(provider));
        track(ps, server);
        server.install(RoutingTable.of(1, List.of("s"), List.of(address), new int[RoutingTable.GROUPS]));
        return new Serving(ps, server, address);
    }

    DeltaFollower follow(Serving s, Training t) {
        return follow(s, t, "tcp");
    }

    DeltaFollower follow(Serving s, Training t, String provider) {
        return DeltaFollower.start(s.server(), () -> List.of(t.address()), rpc(), config(provider), 20);
    }

    static long[] ids(int n, long stride) {
        long[] ids = new long[n];
        for (int i = 0; i < n; i++) {
            ids[i] = i * stride - 5_000;
        }
        return ids;
    }

    static void push(ParameterServer ps, long[] ids, float value) {
        float[] g = new float[ids.length * DIM];
        Arrays.fill(g, value);
        ps.push("t", DIM, ids, 0, ids.length, MemorySegment.ofArray(g));
    }

    /** Whether serving's rows are training's, byte for byte (ids, steps, weights, state). */
    static boolean equal(ParameterServer training, ParameterServer serving) {
        try {
            TreeMap<Long, byte[]> a = ExportRows.of(training.table("t"));
            TreeMap<Long, byte[]> b = ExportRows.of(serving.table("t"));
            if (!a.keySet().equals(b.keySet())) {
                return false;
            }
            for (Map.Entry<Long, byte[]> e : a.entrySet()) {
                if (!Arrays.equals(e.getValue(), b.get(e.getKey()))) {
                    return false;
                }
            }
            return true;
        } catch (PsException notYet) {
            return false;
        }
    }

    static void await(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting for " + what);
            Thread.sleep(5);
        }
    }

}
