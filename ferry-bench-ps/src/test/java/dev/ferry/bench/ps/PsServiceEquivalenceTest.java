package dev.ferry.bench.ps;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.net.PsServer;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;

/**
 * The gRPC service and the Ferry RPC service, each over two servers, return the same rows as a
 * local {@link ParameterServer}, before and after a push.
 */
class PsServiceEquivalenceTest {

    private static final int DIMENSION = 16;
    private static final long IDS = 5_000;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private final List<AutoCloseable> opened = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (AutoCloseable c : opened.reversed()) {
            c.close();
        }
    }

    private ParameterServer ps() {
        ParameterServer ps = ParameterServer.create(PsConfig.defaults());
        ps.createTable(PsBenchServer.table(DIMENSION, Optimizer.adagrad(0.1), IDS, 1));
        opened.add(ps);
        return ps;
    }

    @Test
    void grpcMatchesLocal() throws Exception {
        List<String> addresses = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
                    .addService(new GrpcPsService(ps()))
                    .maxInboundMessageSize(GrpcPsClient.MAX_MESSAGE_BYTES)
                    .build().start();
            opened.add(() -> {
                server.shutdownNow();
                server.awaitTermination(5, TimeUnit.SECONDS);
            });
            addresses.add("127.0.0.1:" + server.getPort());
        }
        GrpcPsClient client = new GrpcPsClient(addresses);
        opened.add(client);
        check(client);
    }

    @Test
    void ferryMatchesLocal() throws Exception {
        List<String> addresses = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            PsServer server = PsServer.open(ps(), i, 2, null, BenchTransport.rpc(2));
            opened.add(server);
            addresses.add(server.rpcServer().listen(BenchTransport.NETTY.config(true, "127.0.0.1", true),
                    new QueueGauge().ferryOpener()));
        }
        FerryPsClient client = new FerryPsClient(BenchTransport.rpc(2), BenchTransport.NETTY.config(true, "127.0.0.1", true),
                addresses);
        opened.add(client);
        check(client);
    }

    private void check(PsBenchClient client) throws Exception {
        ParameterServer local = ps();
        SplittableRandom random = new SplittableRandom(3);
        try (Arena arena = Arena.ofConfined()) {
            for (int round = 0; round < 5; round++) {
                int count = 1 + random.nextInt(600);
                long[] ids = new long[count + 7];
                for (int i = 0; i < ids.length; i++) {
                    ids[i] = random.nextLong(IDS);
                }
                float[] remote = new float[count * DIMENSION];
                MemorySegment expected = arena.allocate((long) count * DIMENSION * Float.BYTES);
                client.pull(PsBenchServer.TABLE, DIMENSION, ids, count, remote).get(10, TimeUnit.SECONDS);
                local.pull(PsBenchServer.TABLE, DIMENSION, ids, 0, count, expected);
                assertArrayEquals(expected.toArray(F32), remote, "pulled rows, round " + round);

                // Distinct ids, so that the client's summing of duplicates changes nothing.
                long[] distinct = java.util.stream.LongStream.of(ids).limit(count).distinct().toArray();
                float[] gradients = new float[distinct.length * DIMENSION];
                for (int i = 0; i < gradients.length; i++) {
                    gradients[i] = (float) random.nextDouble(-1, 1);
                }
                client.push(PsBenchServer.TABLE, DIMENSION, distinct, distinct.length, gradients)
                        .get(10, TimeUnit.SECONDS);
                local.push(PsBenchServer.TABLE, DIMENSION, distinct, 0, distinct.length, MemorySegment.ofArray(gradients));
                client.pull(PsBenchServer.TABLE, DIMENSION, ids, count, remote).get(10, TimeUnit.SECONDS);
                local.pull(PsBenchServer.TABLE, DIMENSION, ids, 0, count, expected);
                assertArrayEquals(expected.toArray(F32), remote, "rows after a push, round " + round);
            }
        }
    }
}
