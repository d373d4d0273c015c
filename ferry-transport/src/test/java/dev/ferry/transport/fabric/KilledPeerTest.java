package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;

import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.Transports;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A peer process killed with SIGKILL while messages flow both ways, eager and rendezvous: its
 * links break without a goodbye (on verbs its queue pairs go away with the process, on tcp its
 * sockets reset, on shm its memory is gone). The surviving side must see the peer fail, fail
 * its pending and later sends with {@link TransportException}, neither hang nor crash, and go on
 * serving other peers. Runs on shm and tcp by default; {@code -Dferry.transport.provider}
 * ({@code verbs/msg}, {@code verbs/rdm}, as {@code bin/verbs-check} passes) runs it on that
 * provider alone. {@code -Dferry.test.childCpus=1} pins the peer's JVM with {@code taskset}.
 */
class KilledPeerTest {

    private static final String HOST = System.getProperty("ferry.host", "127.0.0.1");
    private static final boolean GUEST = "guest".equals(System.getProperty("ferry.test.scale"));
    /** How long anything the survivor must notice may take: far above the 5 s heartbeat timeout. */
    private static final long BOUND_SECONDS = GUEST ? 180 : 30;

    private final List<Transport> opened = new CopyOnWriteArrayList<>();
    private final List<Process> processes = new ArrayList<>();

    static Stream<String> providers() {
        String asked = System.getProperty("ferry.transport.provider");
        return asked != null ? Stream.of(asked) : Stream.of("shm", "tcp");
    }

    /**
     * The configuration both sides use: small pools, default heartbeats. In the verbs guest
     * (emulated CPUs, classes read over 9p) a child JVM's first handshake can take longer than the
     * default 2 s deadline while it loads the classes it needs; there it gets 30 s.
     */
    static TransportConfig config(String provider, String host) {
        TransportConfig config = TransportConfig.defaults(provider).withPools(32L << 20, 64L << 20, 64L << 20);
        if (GUEST) {
            config = config.withHandshakeTimeoutMillis(30_000);
        }
        return provider.startsWith("shm") ? config : config.withBindHost(host);
    }

    /** Message {@code seq}'s size: mostly eager, every fourth one large enough for rendezvous. */
    static int size(int seq) {
        return seq % 4 == 3 ? 256 << 10 : 1 << 10;
    }

    @AfterEach
    void cleanUp() throws InterruptedException {
        stopAll(processes, opened);
    }

    /** Kills {@code processes} by PID (waiting for each) and closes {@code transports}. */
    static void stopAll(List<Process> processes, List<Transport> transports) throws InterruptedException {
        for (Process process : processes) {
            process.destroyForcibly();
            process.waitFor(10, TimeUnit.SECONDS);
        }
        for (Transport transport : transports) {
            transport.close();
        }
    }

    private Transport open(TransportConfig config, MessageHandler handler) {
        Transport transport = Transports.open(config, handler);
        opened.add(transport);
        return transport;
    }

    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(300)
    void aKilledPeerFailsOnTheSurvivingSideWhichCarriesOn(String provider) throws Exception {
        SurvivorHandler handler = new SurvivorHandler();
        AtomicReference<Peer> child = handler.child;
        AtomicInteger received = handler.received;
        AtomicReference<Throwable> closeCause = handler.closeCause;
        CountDownLatch childFailed = handler.childFailed;
        Transport survivor = open(config(provider, HOST), handler);
        Process process = start(provider, survivor.localAddress());
        assertTrue(FabricTransportFixture.waitFor(() -> received.get() >= 20, BOUND_SECONDS * 1000), "the peer's messages never arrived");
        Peer peer = child.get();

        // The survivor sends back, eager and rendezvous, keeping a bounded number in flight.
        List<CompletableFuture<Void>> futures = new CopyOnWriteArrayList<>();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger completed = new AtomicInteger();
        AtomicReference<Throwable> refused = new AtomicReference<>();
        Thread sender = Thread.ofPlatform().name("survivor-sender").start(() -> {
            for (int seq = 0; !stop.get(); seq++) {
                try {
                    if (seq >= 16) {
                        futures.get(seq - 16).handle((v, t) -> null).get(BOUND_SECONDS, TimeUnit.SECONDS);
                    }
                    OutboundMessage message = peer.allocate(size(seq));
                    message.segment().fill((byte) seq);
                    CompletableFuture<Void> future = peer.send(seq % 4, message);
                    future.thenRun(completed::incrementAndGet);
                    futures.add(future);
                } catch (TransportException e) {
                    refused.set(e); // the peer failed: allocate and send refuse
                    return;
                } catch (InterruptedException | ExecutionException | TimeoutException e) {
                    refused.set(new AssertionError("a send never completed nor failed", e));
                    return;
                }
            }
        });
        assertTrue(FabricTransportFixture.waitFor(() -> completed.get() >= 10, BOUND_SECONDS * 1000), "the survivor's sends never completed");

        long pid = process.pid();
        ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly); // SIGKILL, by PID
        assertTrue(process.waitFor(30, TimeUnit.SECONDS), "the peer process " + pid + " did not die");
        int receivedAtKill = received.get();

        if (!childFailed.await(BOUND_SECONDS, TimeUnit.SECONDS)) {
            // A peer killed inside fi_send to the survivor leaves the survivor's own region locked
            // (libfabric 1.17 shm); KilledSenderLock frees it, so this is a failure too.
            FabricPeer fabricPeer = (FabricPeer) peer;
            fail("the survivor never saw the killed peer fail (progress stuck in a completion read: "
                    + (provider.startsWith("shm") && progressStuckInCompletionRead()) + ", peer open " + peer.isOpen() + ", failure "
                    + fabricPeer.failure() + ", control ended " + (fabricPeer.controlEnded.getCount() == 0)
                    + ", peers " + ((FabricTransport) survivor).peers + "); its threads:\n" + ferryThreads());
        }
        assertInstanceOf(TransportException.class, closeCause.get());
        assertFalse(peer.isOpen(), "the killed peer is still open");

        // Every send ends, failed or done, and the sender is not stuck.
        sender.join(TimeUnit.SECONDS.toMillis(BOUND_SECONDS));
        stop.set(true);
        sender.join(TimeUnit.SECONDS.toMillis(BOUND_SECONDS));
        assertFalse(sender.isAlive(), "the survivor's sender hangs");
        if (refused.get() instanceof AssertionError e) {
            throw e;
        }
        int failed = 0;
        for (CompletableFuture<Void> future : futures) {
            try {
                future.get(BOUND_SECONDS, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                assertInstanceOf(TransportException.class, e.getCause());
                failed++;
            } catch (TimeoutException e) {
                fail("a send to the killed peer neither completed nor failed");
            }
        }
        assertTrue(failed > 0 || refused.get() instanceof TransportException,
                "nothing failed after the peer was killed");
        // The transfers the peer was pulling when it died took their keys with them.
        long[] keys = ((FabricTransport) survivor).rendezvousKeyCounts();
        assertTrue(keys[0] > 0, "no rendezvous was sent");
        assertEquals(keys[0], keys[1], "rendezvous keys left open after the peer was killed");

        // A send after the failure is refused.
        try {
            OutboundMessage late = peer.allocate(64);
            ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                    () -> peer.send(0, late).get(BOUND_SECONDS, TimeUnit.SECONDS));
            assertInstanceOf(TransportException.class, e.getCause());
        } catch (TransportException expected) {
            // allocate refused at once
        }

        // The survivor still serves other peers: a new one connects and exchanges messages.
        assertServesANewPeer(provider, survivor, received, 256 << 10);
        assertEquals(0, survivor.counters().receiveBuffersHeld(), "the survivor holds receive buffers");
        System.out.printf("[killed peer %s] %d messages from the peer before the kill, %d sends failed after%n",
                provider, receivedAtKill, failed);
    }

    /**
     * A sender killed while the survivor holds its messages by reference: they lie in the dead
     * process's shared slabs, which the survivor's mappings keep alive, so every byte still
     * reads as sent; released, the mappings go, and nothing of the dead peer is left mapped.
     */
    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(120)
    void messagesByReferenceOutliveTheirKilledSender(String provider) throws Exception {
        List<InboundMessage> held = new CopyOnWriteArrayList<>();
        CountDownLatch failed = new CountDownLatch(1);
        Transport survivor = open(config(provider, HOST), new MessageHandler() {
            @Override
            public void onMessage(Peer from, InboundMessage message) {
                held.add(message);
            }

            @Override
            public void onPeerClosed(Peer peer, Throwable cause) {
                failed.countDown();
            }
        });
        Process process = start(provider, survivor.localAddress(), "shared", null);
        assertTrue(FabricTransportFixture.waitFor(() -> held.size() == KilledPeerChild.SHARED_MESSAGES, BOUND_SECONDS * 1000),
                "held " + held.size() + " messages of the peer");
        String prefix = mappedPrefix(process.pid());
        ProcessHandle.of(process.pid()).ifPresent(ProcessHandle::destroyForcibly); // SIGKILL, by PID
        assertTrue(process.waitFor(30, TimeUnit.SECONDS), "the peer process did not die");
        assertTrue(failed.await(BOUND_SECONDS, TimeUnit.SECONDS), "the survivor never saw the killed peer fail");

        for (int i = 0; i < held.size(); i++) {
            java.lang.foreign.MemorySegment body = held.get(i).segment();
            assertEquals(KilledPeerChild.SHARED_BYTES, body.byteSize());
            byte expected = (byte) (i + 1);
            for (long b = 0; b < body.byteSize(); b++) {
                if (body.get(java.lang.foreign.ValueLayout.JAVA_BYTE, b) != expected) {
                    fail("message " + i + ": byte " + b + " is not " + expected + "");
                }
            }
        }
        assertTrue(prefix != null && mapped(prefix), "the dead peer's slabs are mapped while its messages are held");
        for (InboundMessage message : held) {
            message.release();
        }
        assertTrue(FabricTransportFixture.waitFor(() -> !mapped(prefix), 10_000),
                "the dead peer's slabs stay mapped after its last message was released");
        assertEquals(0, survivor.counters().receiveBuffersHeld());
    }

    /** The name prefix of the shared slabs of process {@code pid} that this process maps, or null. */
    private static String mappedPrefix(long pid) throws IOException {
        // The peer's slab names carry its allocator's random prefix; its pid is not in them, so the
        // prefix is read from what this process maps and the peer's own descriptors.
        for (Path fd : java.nio.file.Files.list(Path.of("/proc/" + pid + "/fd")).toList()) {
            try {
                String target = java.nio.file.Files.readSymbolicLink(fd).toString();
                if (target.startsWith("/memfd:ferry-") && target.contains("-probe")) {
                    return target.substring("/memfd:".length(), target.indexOf("-probe"));
                }
            } catch (IOException e) {
                // closed meanwhile
            }
        }
        return null;
    }

    /** Whether this process maps a slab named with {@code prefix}. */
    private static boolean mapped(String prefix) {
        try {
            return java.nio.file.Files.readAllLines(Path.of("/proc/self/maps")).stream()
                    .anyMatch(line -> line.contains("/memfd:" + prefix + "-") && !line.contains("-probe"));
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /**
     * A peer killed while it holds its own shm region lock (as one killed inside shm's progress
     * does: libfabric 1.17 takes it around all of a receiver's command processing, and senders
     * take the receiver's lock in {@code fi_send}). The survivor's progress thread, spinning on
     * that lock in its next send, must be freed once the peer is proven dead: the survivor sees
     * the peer fail, its sends fail, and it serves a new peer. shm only; skipped on a libfabric
     * whose region layout is not 1.17's.
     */
    @org.junit.jupiter.api.Test
    @Timeout(300)
    void aShmPeerKilledHoldingItsRegionLockDoesNotStopTheSurvivor() throws Exception {
        killedLockHolderDoesNotStopTheSurvivor("hold-lock");
    }

    /**
     * A peer killed while it holds the <em>survivor's</em> shm region lock (as a sender killed
     * inside {@code fi_send} to the survivor does: libfabric 1.17 takes the receiver's lock there).
     * The survivor's own completion reads spin on that lock inside libfabric; once the peer is
     * proven dead and the lock and the fabric token stayed held through a whole window, the
     * survivor releases its own lock ({@link KilledSenderLock}): it sees the peer fail, its sends
     * end, and it serves a new peer. shm only; skipped on a libfabric whose region layout is not 1.17's.
     */
    @org.junit.jupiter.api.Test
    @Timeout(300)
    void aShmSenderKilledHoldingTheSurvivorsRegionLockDoesNotStopTheSurvivor() throws Exception {
        killedLockHolderDoesNotStopTheSurvivor("hold-peer-lock");
    }

    /**
     * The child takes a region lock ({@code hold-lock}: its own; {@code hold-peer-lock}: the
     * survivor's), the survivor sends to it, the child is SIGKILLed: the survivor sees it fail,
     * its sends end, its own lock is free, and it serves a new peer.
     */
    private void killedLockHolderDoesNotStopTheSurvivor(String lock) throws Exception {
        String provider = System.getProperty("ferry.transport.provider", "shm");
        org.junit.jupiter.api.Assumptions.assumeTrue(provider.equals("shm"), "shm only");
        SurvivorHandler handler = new SurvivorHandler();
        AtomicReference<Peer> child = handler.child;
        AtomicInteger received = handler.received;
        CountDownLatch childFailed = handler.childFailed;
        Transport survivor = open(config(provider, HOST), handler);
        AtomicReference<String> locked = new AtomicReference<>();
        Process process = start(provider, survivor.localAddress(), lock, locked);
        assertTrue(FabricTransportFixture.waitFor(() -> received.get() >= 8, BOUND_SECONDS * 1000), "the peer's messages never arrived");
        Peer peer = child.get();
        process.getOutputStream().write("LOCK\n".getBytes(StandardCharsets.UTF_8));
        process.getOutputStream().flush();
        assertTrue(FabricTransportFixture.waitFor(() -> locked.get() != null, BOUND_SECONDS * 1000), "the peer never said whether it locked");
        org.junit.jupiter.api.Assumptions.assumeTrue(locked.get().equals("true"),
                "this libfabric's shm region layout is not 1.17's: nothing to release");

        // With the child's own lock held, the survivor's thread that posts (its progress thread,
        // or this sender when it gets the fabric token) spins in fi_send on it; with the
        // survivor's lock held, every sender to the survivor spins, and so does the survivor's
        // completion read once signalled.
        List<CompletableFuture<Void>> sends = new java.util.concurrent.CopyOnWriteArrayList<>();
        Thread sender = Thread.ofPlatform().name("survivor-sender").start(() -> {
            try {
                for (int seq = 0; seq < 4; seq++) {
                    sends.add(peer.send(seq, filled(peer, 1 << 10)));
                }
            } catch (TransportException e) {
                // freed once the peer was proven dead: it refuses further messages
            }
        });
        Thread.sleep(200);
        long pid = process.pid();
        ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly); // SIGKILL, by PID
        assertTrue(process.waitFor(30, TimeUnit.SECONDS), "the peer process " + pid + " did not die");

        if (!childFailed.await(BOUND_SECONDS, TimeUnit.SECONDS)) {
            fail("the survivor never saw the killed lock holder (" + lock + ") fail; its threads:\n" + ferryThreads());
        }
        sender.join(BOUND_SECONDS * 1000);
        assertFalse(sender.isAlive(), "the sender is still stuck on the dead peer's lock (" + lock + ")");
        assertFalse(sends.isEmpty(), "the sender never sent");
        for (CompletableFuture<Void> send : sends) {
            try {
                send.get(BOUND_SECONDS, TimeUnit.SECONDS); // posted once the lock was released: done or failed
            } catch (ExecutionException e) {
                assertInstanceOf(TransportException.class, e.getCause());
            } catch (TimeoutException e) {
                fail("a send to the killed lock holder neither completed nor failed");
            }
        }
        // A new peer's sends to the survivor spin in fi_send until the survivor's lock is free.
        try (java.nio.channels.FileChannel own = dev.ferry.fabric.ShmRegionLocks.open(((FabricTransport) survivor).fabricAddress())) {
            assertTrue(FabricTransportFixture.waitFor(() -> Boolean.FALSE.equals(dev.ferry.fabric.ShmRegionLocks.held(own)),
                    BOUND_SECONDS * 1000), "the survivor's own region lock was left held (" + lock + ")");
        }
        assertServesANewPeer(provider, survivor, received, 1 << 10);
    }

    /** A new peer connects to the survivor and both exchange a message ({@code size} bytes to it). */
    private void assertServesANewPeer(String provider, Transport survivor, AtomicInteger received, int size) throws Exception {
        CountDownLatch echoed = new CountDownLatch(1);
        Transport other = open(config(provider, HOST), (from, message) -> {
            message.release();
            echoed.countDown();
        });
        int before = received.get();
        Peer fresh = other.connect(survivor.localAddress());
        fresh.send(1, filled(fresh, size)).get(BOUND_SECONDS, TimeUnit.SECONDS);
        assertTrue(FabricTransportFixture.waitFor(() -> received.get() > before, BOUND_SECONDS * 1000), "the new peer's message never arrived");
        Peer back = survivor.connect(other.localAddress());
        back.send(2, filled(back, 1 << 10)).get(BOUND_SECONDS, TimeUnit.SECONDS);
        assertTrue(echoed.await(BOUND_SECONDS, TimeUnit.SECONDS), "the survivor's message to the new peer never arrived");
    }

    /** The survivor's handler: the first peer it hears from is the child, and its failure is counted. */
    private static final class SurvivorHandler implements MessageHandler {
        final AtomicReference<Peer> child = new AtomicReference<>();
        final AtomicInteger received = new AtomicInteger();
        final AtomicReference<Throwable> closeCause = new AtomicReference<>();
        final CountDownLatch childFailed = new CountDownLatch(1);

        @Override
        public void onMessage(Peer from, InboundMessage message) {
            child.compareAndSet(null, from);
            received.incrementAndGet();
            message.release();
        }

        @Override
        public void onPeerClosed(Peer peer, Throwable cause) {
            if (peer == child.get()) {
                closeCause.compareAndSet(null, cause);
                childFailed.countDown();
            }
        }
    }

    /** The stacks of this JVM's transport threads, virtual ones too, for a failure's report. */
    static String ferryThreads() {
        StringBuilder out = new StringBuilder();
        try {
            Path dump = java.nio.file.Files.createTempFile("ferry-threads", ".txt");
            java.nio.file.Files.delete(dump);
            ManagementFactory.getPlatformMXBean(com.sun.management.HotSpotDiagnosticMXBean.class)
                    .dumpThreads(dump.toString(), com.sun.management.HotSpotDiagnosticMXBean.ThreadDumpFormat.TEXT_PLAIN);
            for (String block : java.nio.file.Files.readString(dump).split("\n\n")) {
                if (block.contains("dev.ferry") && !block.contains("ferryThreads")) {
                    out.append(block).append("\n\n");
                }
            }
            java.nio.file.Files.delete(dump);
            return out.toString();
        } catch (IOException | RuntimeException e) {
            out.append("(no full thread dump: ").append(e).append(")\n");
        }
        Thread.getAllStackTraces().forEach((thread, stack) -> {
            if (thread.getName().startsWith("ferry")) {
                out.append(thread.getName()).append(' ').append(thread.getState()).append('\n');
                for (StackTraceElement frame : stack) {
                    out.append("    at ").append(frame).append('\n');
                }
            }
        });
        return out.toString();
    }

    private static OutboundMessage filled(Peer peer, int size) {
        OutboundMessage message = peer.allocate(size);
        message.segment().fill((byte) 7);
        return message;
    }

    /** Whether a progress thread of this JVM stays inside the completion-queue read for a second. */
    private static boolean progressStuckInCompletionRead() throws InterruptedException {
        for (int sample = 0; sample < 10; sample++) {
            boolean stuck = false;
            for (var e : Thread.getAllStackTraces().entrySet()) {
                if (e.getKey().getName().startsWith("ferry-progress") && e.getKey().getState() == Thread.State.RUNNABLE
                        && e.getValue().length > 0 && e.getValue()[0].getClassName().equals(
                                "dev.ferry.fabric.CompletionQueue") && e.getValue()[0].getMethodName().equals("readFrom")) {
                    stuck = true;
                }
            }
            if (!stuck) {
                return false;
            }
            Thread.sleep(100);
        }
        return true;
    }

    private Process start(String provider, String survivorAddress) throws Exception {
        return start(processes, provider, survivorAddress, null, null);
    }

    private Process start(String provider, String survivorAddress, String mode, AtomicReference<String> locked)
            throws Exception {
        return start(processes, provider, survivorAddress, mode, locked);
    }

    /**
     * Starts a {@link KilledPeerChild} JVM that connects to {@code survivorAddress} ({@code mode}:
     * its optional fourth argument), adds it to {@code processes} (for the caller to stop by PID),
     * and returns once it says {@code READY}.
     */
    static Process start(List<Process> processes, String provider, String survivorAddress, String mode,
            AtomicReference<String> locked) throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        String classpath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        List<String> command = new ArrayList<>();
        String cpus = System.getProperty("ferry.test.childCpus");
        if (cpus != null && !cpus.isBlank()) {
            command.addAll(List.of("taskset", "-c", cpus));
        }
        command.addAll(List.of(java, "--enable-native-access=ALL-UNNAMED", "-Xmx512m", "-XX:+UseSerialGC"));
        for (String argument : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (argument.startsWith("-XX:ErrorFile=")) {
                command.add(argument);
            }
        }
        for (String name : System.getProperties().stringPropertyNames()) {
            if (name.startsWith("ferry.")) {
                command.add("-D" + name + "=" + System.getProperty(name));
            }
        }
        command.addAll(List.of("-cp", classpath, KilledPeerChild.class.getName(), provider, HOST, survivorAddress));
        if (mode != null) {
            command.add(mode);
        }
        ProcessBuilder builder = new ProcessBuilder(command);
        builder.redirectError(ProcessBuilder.Redirect.INHERIT);
        Process process = builder.start();
        processes.add(process);
        CountDownLatch ready = new CountDownLatch(1);
        Thread.ofPlatform().daemon().name("peer-" + process.pid()).start(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(),
                    StandardCharsets.UTF_8))) {
                for (String line; (line = in.readLine()) != null; ) {
                    if (line.startsWith("READY")) {
                        ready.countDown();
                    } else if (line.startsWith("LOCKED ") && locked != null) {
                        locked.set(line.substring("LOCKED ".length()));
                    } else {
                        System.out.println("peer said: " + line);
                    }
                }
            } catch (IOException e) {
                // killed
            }
        });
        if (!ready.await(BOUND_SECONDS, TimeUnit.SECONDS)) {
            if (process.isAlive()) {
                // Its threads, on its standard output (echoed above), for the failure's report.
                new ProcessBuilder("kill", "-QUIT", Long.toString(process.pid())).inheritIO().start().waitFor();
                Thread.sleep(5_000);
            }
            fail("the peer process never became ready (" + (process.isAlive() ? "still running"
                    : "exited with " + process.exitValue()) + ")");
        }
        return process;
    }
}
