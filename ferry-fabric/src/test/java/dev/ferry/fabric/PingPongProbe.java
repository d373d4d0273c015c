package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.HexFormat;

/**
 * A ping-pong between two JVMs over one provider of the binding, for hosts where the
 * benchmarks' loopback-only set-up does not apply (verbs binds to an RDMA interface's address).
 * {@code bin/verbs-check --bench} runs it in the Soft-RoCE guest, each side pinned to its own
 * vCPU. The server prints {@code ADDRESS <hex>} and echoes every message until a 1-byte one; the
 * client reads the address from its arguments, warms up, measures round trips at each size and
 * prints one {@code RESULT} line per size (median, p99 and mean round trip; MB/s counts the bytes
 * of both directions per round trip, as {@code fi_pingpong} does).
 *
 * <pre>
 *   java ... dev.ferry.fabric.PingPongProbe server verbs MSG 192.0.2.1
 *   java ... dev.ferry.fabric.PingPongProbe client verbs MSG 192.0.2.1 &lt;hex&gt; [64:20000,4096:10000,1048576:200]
 * </pre>
 */
public final class PingPongProbe {

    private static final int MAX = 1 << 20;
    private static final int STOP = 1;

    private PingPongProbe() {
    }

    public static void main(String[] args) throws Exception {
        String role = args[0];
        String provider = args[1];
        EndpointType type = EndpointType.valueOf(args[2]);
        String host = args[3];
        try (FabricSession session = FabricSession.open(provider, type, host, role.equals("server"), 256);
             Arena arena = Arena.ofShared();
             OperationContexts contexts = new OperationContexts(2);
             CompletionBatch batch = new CompletionBatch(16)) {
            MemorySegment memory = arena.allocate(2L * MAX, 4096);
            MemoryRegion mr = session.domain().register(memory);
            Side side = new Side(session, memory, mr, contexts, batch);
            if (role.equals("server")) {
                side.serve();
            } else {
                side.measure(HexFormat.of().parseHex(args[4]), args.length > 5 ? args[5] : "64:20000,4096:10000,1048576:200");
            }
        }
    }

    private static final class Side {
        final FabricSession session;
        final MemorySegment memory;
        final MemoryRegion mr;
        final OperationContexts contexts;
        final CompletionBatch batch;
        Endpoint ep;
        long peer = Fi.ADDR_UNSPEC;
        long received = -1;
        boolean sent;

        Side(FabricSession session, MemorySegment memory, MemoryRegion mr, OperationContexts contexts,
                CompletionBatch batch) {
            this.session = session;
            this.memory = memory;
            this.mr = mr;
            this.contexts = contexts;
            this.batch = batch;
        }

        void postReceive() {
            while (!ep.recv(memory.address(), MAX, mr.descriptor(), Fi.ADDR_UNSPEC, contexts.context(0))) {
                poll();
            }
        }

        void send(int length) {
            sent = false;
            while (!ep.send(memory.address() + MAX, length, mr.descriptor(), peer, contexts.context(1))) {
                poll();
            }
        }

        void poll() {
            CompletionQueue cq = session.completionQueue();
            int n = cq.read(batch);
            if (n == CompletionQueue.ERROR_AVAILABLE) {
                throw new FabricException("error completion: " + cq.readError());
            }
            for (int i = 0; i < n; i++) {
                if (batch.context(i) == contexts.context(0)) {
                    received = batch.length(i);
                } else if (batch.context(i) == contexts.context(1)) {
                    sent = true;
                }
            }
        }

        /** Waits for the next message and the last send, then reposts the receive; returns the length. */
        long exchange() {
            while (received < 0 || !sent) {
                poll();
            }
            long length = received;
            received = -1;
            postReceive();
            return length;
        }

        void serve() {
            if (session.info().endpointType() == EndpointType.MSG) {
                System.out.println("ADDRESS " + HexFormat.of().formatHex(session.address()));
                System.out.flush();
                FabricSession.Connection c = session.accept(120_000, e -> {
                    ep = e;
                    mr.bind(e);
                    postReceive();
                });
                ep = c.endpoint();
            } else {
                ep = session.sharedEndpoint();
                mr.bind(ep);
                postReceive();
                System.out.println("ADDRESS " + HexFormat.of().formatHex(session.address()));
                System.out.flush();
                // The first message is the client's address, to reply to.
                while (received < 0) {
                    poll();
                }
                byte[] client = memory.asSlice(0, received).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
                peer = session.connect(client, 0).peer();
                memory.asSlice(MAX, received).copyFrom(memory.asSlice(0, received));
                long length = received;
                received = -1;
                postReceive();
                send((int) length);
            }
            sent = true;
            while (true) {
                long length = exchange();
                if (length == STOP) {
                    return;
                }
                send((int) length);
            }
        }

        void measure(byte[] server, String plan) {
            FabricSession.Connection c = session.connect(server, 120_000);
            ep = c.endpoint();
            peer = c.peer();
            mr.bind(ep);
            postReceive();
            sent = true;
            if (session.info().endpointType() == EndpointType.RDM) {
                byte[] self = session.address();
                MemorySegment.copy(MemorySegment.ofArray(self), 0, memory, MAX, self.length);
                send(self.length);
                exchange();
            }
            for (String step : plan.split(",")) {
                int size = Integer.parseInt(step.split(":")[0]);
                int iterations = Integer.parseInt(step.split(":")[1]);
                long warmUntil = System.nanoTime() + 2_000_000_000L;
                for (int i = 0; i < 100 || System.nanoTime() < warmUntil; i++) {
                    send(size);
                    exchange();
                }
                long[] rtt = new long[iterations];
                long started = System.nanoTime();
                for (int i = 0; i < iterations; i++) {
                    long t0 = System.nanoTime();
                    send(size);
                    exchange();
                    rtt[i] = System.nanoTime() - t0;
                }
                long total = System.nanoTime() - started;
                Arrays.sort(rtt);
                double mean = total / 1e3 / iterations;
                System.out.printf("RESULT %s %s %d B x %d: median %.1f us, p99 %.1f us, mean %.1f us, %.1f MB/s%n",
                        session.info().provider(), session.info().endpointType(), size, iterations,
                        rtt[iterations / 2] / 1e3, rtt[(int) (iterations * 0.99)] / 1e3, mean,
                        2.0 * size * iterations / (total / 1e9) / 1e6);
                System.out.flush();
            }
            send(STOP);
            while (!sent) {
                poll();
            }
        }
    }
}
