package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.TableConfig;
import dev.ferry.rpc.RpcDescriptor;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The property, on a real server process per transport: with authentication on, no byte
 * sequence from an unauthenticated connection reads or changes the parameter server's state,
 * and nothing is answered to it beyond the refusal (or the challenge that precedes one). Every
 * port the server listens on (as {@code ss} would list them: the control channel or Netty port,
 * and on tcp the libfabric provider's own listener) gets random bytes, bytes shaped like each
 * protocol's opening, and a good client's recorded session replayed, whole and with only its
 * requests (fresh call ids, so that deduplication cannot hide a bypass) while that client is
 * still connected and authenticated.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class UnauthenticatedPortsTest {

    private static final List<String> JVM = List.of("-Xmx256m", "-XX:TieredStopAtLevel=1");
    private static final int MAGIC = 0x46525933;
    private static final int NETTY_HEADER = 12;
    private static final int QUIET_MILLIS = 3_000;

    @ParameterizedTest
    @ValueSource(strings = {"tcp", "shm", "netty"})
    void noUnauthenticatedBytesReadOrChangeState(String transport) throws Exception {
        long[] ids = new long[64];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = 1_000L + 17L * i;
        }
        float[] gradients = new float[ids.length * 8];
        Arrays.fill(gradients, 0.25f);
        try (LocalCluster cluster = LocalCluster.start(1, transport, null, JVM)) {
            String address = cluster.addresses().get(0);
            String host = address.substring(0, address.lastIndexOf(':'));
            int port = Integer.parseInt(address.substring(address.lastIndexOf(':') + 1));
            try (HostilePorts.Recorder recorder = new HostilePorts.Recorder(host, port);
                 PsClient victim = PsClient.connect(cluster.rpcConfig(), cluster.clientTransport(),
                         List.of(recorder.address()))) {
                victim.createTable(TableConfig.of("emb", 8, Optimizer.sgd(0.1)));
                victim.push("emb", ids, gradients);
                float[] before = victim.pull("emb", ids);
                List<List<ServerInfo.Table>> described = tables(victim);
                List<byte[]> recorded = recorder.sessions();
                assertFalse(recorded.isEmpty(), "the relay recorded nothing");

                List<Integer> ports = HostilePorts.listening(cluster.pid(0));
                assertTrue(ports.contains(port), "the server's own port is not among " + ports);
                if (transport.equals("tcp")) {
                    assertTrue(ports.size() >= 2, "no provider listener among " + ports);
                }
                // All at once: each waits for the server's close, at its handshake deadline at most.
                List<java.util.concurrent.Future<String>> verdicts = new ArrayList<>();
                try (var attackers = java.util.concurrent.Executors.newVirtualThreadPerTaskExecutor()) {
                    for (int p : ports) {
                        Kind kind = p == port ? (transport.equals("netty") ? Kind.NETTY : Kind.CONTROL) : Kind.PROVIDER;
                        for (byte[] bytes : attacks(recorded, transport, p, kind)) {
                            for (boolean shut : new boolean[] {false, true}) {
                                verdicts.add(attackers.submit(() -> {
                                    byte[] answer = HostilePorts.exchange(host, p, bytes, shut, QUIET_MILLIS);
                                    String problem = kind.judge(answer);
                                    return problem == null ? null : transport + " port " + p + " (" + kind + ") answered "
                                            + answer.length + " bytes to " + bytes.length + " unauthenticated bytes: "
                                            + problem;
                                }));
                            }
                        }
                    }
                }
                int attacks = 0;
                for (var verdict : verdicts) {
                    String problem = verdict.get();
                    if (problem != null) {
                        fail(problem);
                    }
                    attacks++;
                }
                // The victim is still served, and nothing changed: the same rows, bit for bit,
                // and the same tables; a fresh client sees the same.
                assertTrue(attacks > 0);
                float[] after = victim.pull("emb", ids);
                assertBitwiseEqual(before, after);
                assertEquals(described, tables(victim));
                try (PsClient fresh = PsClient.connect(cluster.rpcConfig(), cluster.clientTransport(), cluster.addresses())) {
                    assertBitwiseEqual(before, fresh.pull("emb", ids));
                    assertEquals(described, tables(fresh));
                }
                victim.push("emb", ids, gradients);
                float[] pushed = victim.pull("emb", ids);
                assertFalse(Arrays.equals(before, pushed), "the victim's own push did not apply after the attacks");
            }
        }
    }

    private static List<List<ServerInfo.Table>> tables(PsClient client) {
        return client.describeServers().stream().map(ServerInfo::tables).toList();
    }

    private static void assertBitwiseEqual(float[] expected, float[] actual) {
        assertEquals(expected.length, actual.length);
        for (int i = 0; i < expected.length; i++) {
            assertEquals(Float.floatToRawIntBits(expected[i]), Float.floatToRawIntBits(actual[i]),
                    "element " + i + " changed");
        }
    }

    /** The byte sequences sent to one port. */
    private static List<byte[]> attacks(List<byte[]> recorded, String transport, int port, Kind kind) throws IOException {
        SplittableRandom random = new SplittableRandom(port * 31L + transport.hashCode());
        List<byte[]> attacks = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            byte[] bytes = new byte[1 + random.nextInt(i < 6 ? 64 : 4096)];
            random.nextBytes(bytes);
            attacks.add(bytes);
        }
        // The opening of each protocol, then garbage.
        attacks.add(concat(intBytes(MAGIC), new byte[] {0}, random(random, 16), random(random, 40)));
        attacks.add(concat(intBytes(MAGIC), new byte[] {1}, random(random, 16), new byte[] {0, 32}, random(random, 32)));
        attacks.add(concat(intBytes(MAGIC), new byte[] {1}, random(random, 16), new byte[] {(byte) 0xff, (byte) 0xff}));
        attacks.add(nettyFrame(1, 0, concat(new byte[] {1}, random(random, 16),
                "127.0.0.1:1".getBytes(StandardCharsets.UTF_8))));
        attacks.add(concat(nettyFrame(1, 0, concat(new byte[] {0}, random(random, 16),
                "127.0.0.1:1".getBytes(StandardCharsets.UTF_8))), nettyFrame(2, 1, random(random, 100))));
        attacks.add(nettyHeader(2, 0, 256 << 20));
        attacks.add(HostilePorts.providerConnectionRequest(random.nextInt()));
        attacks.add(concat(HostilePorts.providerConnectionRequest(random.nextInt()), random(random, 200)));
        // A good client's session replayed: whole, and (Netty) its hello with only its requests.
        for (byte[] session : recorded) {
            attacks.add(session);
            if (kind == Kind.NETTY) {
                attacks.add(helloAndRequests(session, random));
            }
        }
        return attacks;
    }

    /** The first frame of a Netty session (its hello) and its RPC requests with fresh call ids. */
    private static byte[] helloAndRequests(byte[] session, SplittableRandom random) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteBuffer in = ByteBuffer.wrap(session);
        boolean first = true;
        while (in.remaining() >= NETTY_HEADER) {
            int start = in.position();
            int length = in.getInt(start);
            byte type = in.get(start + 4);
            if (length < 0 || in.remaining() < NETTY_HEADER + length) {
                break;
            }
            byte[] frame = Arrays.copyOfRange(session, start, start + NETTY_HEADER + length);
            boolean request = type == 2 && length >= RpcDescriptor.HEADER
                    && frame[NETTY_HEADER + RpcDescriptor.TYPE_OFFSET] == RpcDescriptor.REQUEST;
            if (request) {
                frame[NETTY_HEADER + RpcDescriptor.CALL_ID_OFFSET + 5] ^= (byte) (1 + random.nextInt(255));
            }
            if (first || request) {
                out.write(frame);
            }
            first = false;
            in.position(start + NETTY_HEADER + length);
        }
        return out.toByteArray();
    }

    /** What a port may answer an unauthenticated connection. */
    private enum Kind {
        /** The fabric transports' control channel: a challenge, a refusal, or a challenge then a refusal. */
        CONTROL {
            @Override
            String judge(byte[] answer) {
                ByteBuffer b = ByteBuffer.wrap(answer);
                int answers = 0;
                while (b.hasRemaining()) {
                    if (++answers > 2 || b.remaining() < 5 || b.getInt() != MAGIC) {
                        return "not a challenge or refusal: " + hex(answer);
                    }
                    byte status = b.get();
                    if (status == 0) {
                        if (b.remaining() < 18) {
                            return "a truncated challenge";
                        }
                        b.position(b.position() + 16);
                        int proof = Short.toUnsignedInt(b.getShort());
                        if (proof > 32 || b.remaining() < proof) {
                            return "a challenge with a " + proof + "-byte proof";
                        }
                        b.position(b.position() + proof);
                    } else if (status == 1) {
                        if (b.remaining() < 2) {
                            return "a truncated refusal";
                        }
                        int reason = Short.toUnsignedInt(b.getShort());
                        if (b.remaining() < reason) {
                            return "a truncated refusal";
                        }
                        b.position(b.position() + reason);
                    } else {
                        return "status " + status;
                    }
                }
                return null;
            }
        },
        /** The Netty port: CHALLENGE frames only. */
        NETTY {
            @Override
            String judge(byte[] answer) {
                ByteBuffer b = ByteBuffer.wrap(answer);
                while (b.hasRemaining()) {
                    if (b.remaining() < NETTY_HEADER) {
                        return "a truncated frame: " + hex(answer);
                    }
                    int length = b.getInt();
                    byte type = b.get();
                    b.position(b.position() + 7);
                    if (type != 3) {
                        return "a frame of type " + type + ": " + hex(answer);
                    }
                    if (length < 0 || length > 1024 || b.remaining() < length) {
                        return "a challenge of " + length + " bytes";
                    }
                    b.position(b.position() + length);
                }
                return null;
            }
        },
        /** libfabric's tcp listener: nothing, or its refusal (a NACK header). */
        PROVIDER {
            @Override
            String judge(byte[] answer) {
                if (answer.length == 0) {
                    return null;
                }
                if (answer.length >= 32 && answer[0] == 3 && answer[1] == 6) {
                    return null;
                }
                return "not a refusal: " + hex(answer);
            }
        };

        abstract String judge(byte[] answer);
    }

    private static String hex(byte[] bytes) {
        return java.util.HexFormat.of().formatHex(bytes, 0, Math.min(bytes.length, 64)) + (bytes.length > 64 ? "..." : "");
    }

    private static byte[] intBytes(int v) {
        return ByteBuffer.allocate(4).putInt(v).array();
    }

    private static byte[] random(SplittableRandom random, int n) {
        byte[] b = new byte[n];
        random.nextBytes(b);
        return b;
    }

    private static byte[] nettyHeader(int type, int stream, int length) {
        return ByteBuffer.allocate(NETTY_HEADER).putInt(length).put((byte) type).put((byte) 1).putShort((short) 0)
                .putInt(stream).array();
    }

    private static byte[] nettyFrame(int type, int stream, byte[] payload) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        new DataOutputStream(b).write(nettyHeader(type, stream, payload.length));
        b.write(payload);
        return b.toByteArray();
    }

    private static byte[] concat(byte[]... parts) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        for (byte[] p : parts) {
            b.writeBytes(p);
        }
        return b.toByteArray();
    }
}
