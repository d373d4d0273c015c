package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.TableConfig;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A server process under abuse at every port it listens on: silent connections, connections
 * that trickle a protocol's opening a byte at a time (each reconnecting when the server drops
 * it), and a flood of connect-and-drop. Meanwhile good clients connect, push and pull, one after
 * another, and must all succeed; once the abuse stops, the server's open files return to where
 * they were before it.
 *
 * <p>CI runs 5 s of 50 silent and 50 trickling connections per port; {@code -Pfull} (or
 * {@code -Dferry.abuse.full=true}) runs the figure, 30 s of 500 and 500. Each run
 * prints, and writes to {@code target/port-abuse-<transport>.txt}, every good client's
 * connect + push + pull time and the server's open files before, at the peak and after.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class PortAbuseTest {

    private static final boolean FULL = "full".equals(System.getProperty("ferry.test.scale"))
            || Boolean.getBoolean("ferry.abuse.full");
    private static final long SECONDS = Long.getLong("ferry.abuse.seconds", FULL ? 30 : 5);
    private static final int SILENT = Integer.getInteger("ferry.abuse.silent", FULL ? 500 : 50);
    private static final int TRICKLING = Integer.getInteger("ferry.abuse.trickling", FULL ? 500 : 50);
    /** Connect-and-drop per second per port, at most: a flood that leaves the 2-core host usable. */
    private static final int FLOOD_PER_SECOND = 500;
    /** Files the server may open beyond its level before: lazily made JVM and provider state. */
    private static final int SLACK = 8;
    private static final List<String> JVM = List.of("-Xmx512m");

    @ParameterizedTest
    @ValueSource(strings = {"tcp", "shm", "netty"})
    void goodClientsGetInWhileEveryPortIsAbused(String transport) throws Exception {
        try (LocalCluster cluster = LocalCluster.start(1, transport, null, JVM)) {
            long pid = cluster.pid(0);
            String address = cluster.addresses().get(0);
            String host = address.substring(0, address.lastIndexOf(':'));
            int control = Integer.parseInt(address.substring(address.lastIndexOf(':') + 1));
            long[] ids = new long[256];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = i * 7L;
            }
            float[] gradients = new float[ids.length * 16];
            Arrays.fill(gradients, 0.01f);
            try (PsClient setup = PsClient.connect(cluster.rpcConfig(), cluster.clientTransport(), cluster.addresses())) {
                setup.createTable(TableConfig.of("emb", 16, Optimizer.sgd(0.1)));
            }
            for (int i = 0; i < 3; i++) {
                probe(cluster, ids, gradients); // warm up: what the server opens lazily is open now
            }
            // The baseline of the same run: good clients without abuse.
            List<Long> baseline = new ArrayList<>();
            for (int i = 0; i < (FULL ? 20 : 3); i++) {
                baseline.add(probe(cluster, ids, gradients));
                Thread.sleep(200);
            }
            Thread.sleep(500);
            long before = HostilePorts.openFiles(pid);
            List<Integer> ports = HostilePorts.listening(pid);

            Abuse abuse = new Abuse(host, ports, control, transport);
            List<Long> latencies = new ArrayList<>();
            List<Long> connects = new ArrayList<>();
            long peak = before;
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(SECONDS);
            abuse.start();
            try {
                Thread.sleep(Math.min(2_000, SECONDS * 200)); // let the abuse build up first
                while (System.nanoTime() < end) {
                    latencies.add(probe(cluster, ids, gradients));
                    connects.add(lastConnectNanos);
                    peak = Math.max(peak, HostilePorts.openFiles(pid));
                    Thread.sleep(200);
                }
            } finally {
                abuse.stop();
            }
            long stopped = System.nanoTime();
            long after;
            while ((after = HostilePorts.openFiles(pid)) > before + SLACK
                    && System.nanoTime() - stopped < TimeUnit.SECONDS.toNanos(10)) {
                Thread.sleep(100);
            }
            long settleMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - stopped);
            // And a good client still gets in.
            latencies.add(probe(cluster, ids, gradients));

            String report = report(transport, ports, baseline, latencies, connects, before, peak, after, settleMillis,
                    abuse);
            System.out.println(report);
            Files.writeString(Path.of("target", "port-abuse-" + transport + ".txt"), report);
            assertTrue(abuse.connections.get() > SILENT, "the abuse never got going: " + report);
            assertTrue(after <= before + SLACK, "open files did not return within 10 s: " + report);
        }
    }

    /** Time of the connect (handshakes) in the latest probe; the rest is push, pull and close. */
    private static long lastConnectNanos;

    /** A good client: connect, push, pull, close; returns the nanoseconds it took. */
    private static long probe(LocalCluster cluster, long[] ids, float[] gradients) {
        long start = System.nanoTime();
        try (PsClient client = PsClient.connect(cluster.rpcConfig(), cluster.clientTransport(), cluster.addresses())) {
            lastConnectNanos = System.nanoTime() - start;
            client.push("emb", ids, gradients);
            float[] rows = client.pull("emb", ids);
            assertEquals(ids.length * 16, rows.length);
        }
        return System.nanoTime() - start;
    }

    private static String report(String transport, List<Integer> ports, List<Long> baseline, List<Long> latencies,
            List<Long> connects, long before, long peak, long after, long settleMillis, Abuse abuse) {
        long[] connecting = connects.stream().mapToLong(Long::longValue).sorted().toArray();
        long[] sorted = latencies.stream().mapToLong(Long::longValue).sorted().toArray();
        long[] quiet = baseline.stream().mapToLong(Long::longValue).sorted().toArray();
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "port abuse on %s: %d s, ports %s, %d silent + %d trickling per port, "
                        + "flood %d/s per port; %d abusive connections made, %d trickles answered (a challenge after a whole opening)%n",
                transport, SECONDS, ports, SILENT, TRICKLING, FLOOD_PER_SECOND, abuse.connections.get(),
                abuse.answered.get()));
        b.append(String.format(Locale.ROOT, "good clients (connect + push + pull + close): %d, p50 %.1f ms, max %.1f ms, "
                        + "over 1 s: %d%n", sorted.length, sorted[sorted.length / 2] / 1e6, sorted[sorted.length - 1] / 1e6,
                Arrays.stream(sorted).filter(n -> n > 1_000_000_000L).count()));
        if (connecting.length > 0) {
            b.append(String.format(Locale.ROOT, "of which the connect (control and fabric handshakes): p50 %.1f ms, "
                    + "max %.1f ms%n", connecting[connecting.length / 2] / 1e6, connecting[connecting.length - 1] / 1e6));
        }
        b.append(String.format(Locale.ROOT, "baseline without abuse (same run): %d, p50 %.1f ms, max %.1f ms; "
                        + "p50 under abuse / baseline p50: %.2f%n", quiet.length, quiet[quiet.length / 2] / 1e6,
                quiet[quiet.length - 1] / 1e6, (double) sorted[sorted.length / 2] / quiet[quiet.length / 2]));
        b.append(String.format(Locale.ROOT, "server open files: before %d, peak during %d, after %d (%d ms after the abuse)%n",
                before, peak, after, settleMillis));
        b.append("each good client, ms:");
        for (long n : latencies) {
            b.append(String.format(Locale.ROOT, " %.1f", n / 1e6));
        }
        return b.append('\n').toString();
    }

    /** The abusers of every port; each reconnects when the server drops it, until stopped. */
    private static final class Abuse {

        private final String host;
        private final List<Integer> ports;
        private final int control;
        private final String transport;
        private final AtomicBoolean stopping = new AtomicBoolean();
        private final List<Thread> threads = new ArrayList<>();
        private final List<Socket> sockets = new CopyOnWriteArrayList<>();
        final AtomicLong connections = new AtomicLong();
        final AtomicLong answered = new AtomicLong();

        Abuse(String host, List<Integer> ports, int control, String transport) {
            this.host = host;
            this.ports = ports;
            this.control = control;
            this.transport = transport;
        }

        void start() {
            for (int port : ports) {
                byte[] opening = opening(port);
                for (int i = 0; i < SILENT; i++) {
                    threads.add(Thread.ofVirtual().start(() -> silent(port)));
                }
                for (int i = 0; i < TRICKLING; i++) {
                    threads.add(Thread.ofVirtual().start(() -> trickle(port, opening)));
                }
                threads.add(Thread.ofPlatform().daemon().name("abuse-flood-" + port).start(() -> flood(port)));
            }
        }

        void stop() throws InterruptedException {
            stopping.set(true);
            for (Socket s : sockets) {
                closeQuietly(s);
            }
            for (Thread t : threads) {
                t.interrupt();
                t.join(10_000);
            }
            for (Socket s : sockets) {
                closeQuietly(s);
            }
        }

        /** What a trickler sends a byte at a time: the beginning of a real handshake. */
        private byte[] opening(int port) {
            if (port != control) {
                return HostilePorts.providerConnectionRequest(0x5eed);
            }
            if (transport.equals("netty")) {
                byte[] address = "127.0.0.1:1".getBytes(StandardCharsets.UTF_8);
                return ByteBuffer.allocate(12 + 17 + address.length).putInt(17 + address.length).put((byte) 1)
                        .put((byte) 1).putShort((short) 0).putInt(0).put((byte) 1).put(new byte[16]).put(address).array();
            }
            return ByteBuffer.allocate(4 + 1 + 16).putInt(0x46525933).put((byte) 1).put(new byte[16]).array();
        }

        private Socket connect(int port) throws IOException {
            Socket s = new Socket();
            sockets.add(s);
            if (stopping.get()) {
                s.close();
                throw new IOException("stopping");
            }
            s.connect(new InetSocketAddress(host, port), 5_000);
            connections.incrementAndGet();
            return s;
        }

        private void silent(int port) {
            while (!stopping.get()) {
                try (Socket s = connect(port)) {
                    InputStream in = s.getInputStream();
                    byte[] buffer = new byte[256];
                    while (in.read(buffer) >= 0) {
                        // a challenge may come (it never does before a hello): wait for the close
                    }
                } catch (IOException e) {
                    // dropped by the server, or stopping
                } finally {
                    sockets.removeIf(Socket::isClosed);
                }
            }
        }

        private void trickle(int port, byte[] opening) {
            while (!stopping.get()) {
                try (Socket s = connect(port)) {
                    OutputStream out = s.getOutputStream();
                    InputStream in = s.getInputStream();
                    for (int i = 0; !stopping.get(); i++) {
                        out.write(opening[i % opening.length]);
                        out.flush();
                        Thread.sleep(150);
                        if (in.available() > 0) {
                            answered.incrementAndGet();
                            return;
                        }
                    }
                } catch (IOException e) {
                    // dropped by the server, or stopping
                } catch (InterruptedException e) {
                    return;
                } finally {
                    sockets.removeIf(Socket::isClosed);
                }
            }
        }

        private void flood(int port) {
            long pauseNanos = TimeUnit.SECONDS.toNanos(1) / FLOOD_PER_SECOND;
            while (!stopping.get()) {
                try {
                    new Socket(host, port).close();
                    connections.incrementAndGet();
                } catch (IOException e) {
                    // backlog full: the flood goes on
                }
                java.util.concurrent.locks.LockSupport.parkNanos(pauseNanos);
            }
        }

        private static void closeQuietly(Socket s) {
            try {
                s.close();
            } catch (IOException e) {
                // closing anyway
            }
        }
    }
}
