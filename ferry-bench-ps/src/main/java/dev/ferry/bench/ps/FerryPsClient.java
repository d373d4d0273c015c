package dev.ferry.bench.ps;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

import dev.ferry.ps.PullFormat;
import dev.ferry.ps.net.PsClient;
import dev.ferry.rpc.RpcClientCounters;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.transport.TransportConfig;

/**
 * The benchmark's client over Ferry: the parameter server's own {@link PsClient} (one RPC client,
 * one transport per process, one channel per server, shared by all threads). Ids and summed
 * gradients are encoded straight into registered send buffers; pulled rows are copied once, from
 * the receive buffer into the caller's array.
 */
final class FerryPsClient implements PsBenchClient {

    private final PsClient client;
    private final PullFormat format;

    FerryPsClient(RpcConfig rpc, TransportConfig transport, List<String> servers) {
        this(rpc, transport, servers, PullFormat.F32);
    }

    /** A client whose pulls ask for rows in {@code format}. */
    FerryPsClient(RpcConfig rpc, TransportConfig transport, List<String> servers, PullFormat format) {
        this.client = PsClient.connect(rpc, transport, servers);
        this.format = format;
    }

    @Override
    public CompletableFuture<Void> pull(String table, int dimension, long[] ids, int count, float[] out) {
        return client.pullAsync(table, exact(ids, count), out, format);
    }

    /** Rows are copied from the receive buffers on the calling thread ({@link PsClient#pull(String, long[], int, int, float[])}). */
    @Override
    public void pullAndWait(String table, int dimension, long[] ids, int count, float[] out) {
        client.pull(table, ids, 0, count, out, format);
    }

    @Override
    public CompletableFuture<Void> push(String table, int dimension, long[] ids, int count, float[] gradients) {
        float[] rows = gradients.length == count * dimension ? gradients : Arrays.copyOf(gradients, count * dimension);
        return client.pushAsync(table, exact(ids, count), rows);
    }

    /** PsClient takes the whole array as the batch. */
    private static long[] exact(long[] ids, int count) {
        return ids.length == count ? ids : Arrays.copyOf(ids, count);
    }

    @Override
    public void bindMetrics(dev.ferry.metrics.FerryMetrics metrics) {
        metrics.bind(client.rpcClient());
    }

    @Override
    public Map<String, Long> counters() {
        Map<String, Long> out = new LinkedHashMap<>();
        Counters.put(out, "client_", client.rpcClient().primaryTransport().counters());
        RpcClientCounters rpc = client.rpcClient().counters();
        out.put("client_rpc_resends", rpc.resends());
        out.put("client_rpc_timeouts", rpc.timeouts());
        return out;
    }

    @Override
    public void close() {
        client.close();
    }
}
