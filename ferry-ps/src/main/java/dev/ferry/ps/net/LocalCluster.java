package dev.ferry.ps.net;

import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.function.IntPredicate;

import dev.ferry.rpc.RpcConfig;
import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.TransportConfig;

/**
 * A parameter-server cluster on this host: {@code n} {@link PsServerMain} child processes on this
 * JVM's java and class path, each told its index, listening on loopback. The cluster draws a
 * random RPC secret and hands it to the children in their environment.
 *
 * <p>Children are stopped by their own PID whatever happens: {@link #close()} sends SIGTERM, then
 * SIGKILL after a grace period; a shutdown hook does the same if this JVM exits first; and the
 * children exit by themselves when their standard input (a pipe from this process) closes, which
 * covers this JVM being killed.
 */
public final class LocalCluster implements AutoCloseable {

    /** How long a child gets to start and print its address. */
    private static final long START_MILLIS = 30_000;

    private final String transport;
    private final Path checkpointRoot;
    private final List<String> jvmOptions;
    private final String secret;
    private final ChildJvm[] children;
    private final String[] addresses;
    private final Thread hook;
    private int spawned;

    private LocalCluster(int servers, String transport, Path checkpointRoot, List<String> jvmOptions) {
        this.transport = transport;
        this.checkpointRoot = checkpointRoot;
        this.jvmOptions = List.copyOf(jvmOptions);
        byte[] key = new byte[24];
        new SecureRandom().nextBytes(key);
        this.secret = HexFormat.of().formatHex(key);
        this.children = new ChildJvm[servers];
        this.addresses = new String[servers];
        this.hook = new Thread(this::stopAll, "ferry-cluster-stop");
        Runtime.getRuntime().addShutdownHook(hook);
    }

    /**
     * Starts {@code servers} server processes on {@code transport} and waits until all listen.
     *
     * @param checkpointRoot server {@code i} restores from and checkpoints into
     *                       {@code checkpointRoot/server-i}; null for no checkpoints
     * @param jvmOptions     options for the children's JVMs (heap size, ...)
     * @throws IllegalStateException if a child fails to start; those started are stopped
     */
    public static LocalCluster start(int servers, String transport, Path checkpointRoot, List<String> jvmOptions) {
        if (servers < 1) {
            throw new IllegalArgumentException("servers must be >= 1: " + servers);
        }
        LocalCluster cluster = new LocalCluster(servers, transport, checkpointRoot, jvmOptions);
        try {
            for (int i = 0; i < servers; i++) {
                cluster.children[i] = cluster.spawn(i, false);
            }
            for (int i = 0; i < servers; i++) {
                cluster.addresses[i] = cluster.awaitAddress(i);
            }
            return cluster;
        } catch (RuntimeException e) {
            cluster.close();
            throw e;
        }
    }

    /** The servers' addresses, server {@code i} at {@code i}. */
    public synchronized List<String> addresses() {
        return List.of(addresses);
    }

    /** The RPC settings a client of this cluster needs (its secret). */
    public RpcConfig rpcConfig() {
        return RpcConfig.defaults().withSecret(SharedSecret.of(secret));
    }

    /** The transport a client of this cluster uses. */
    public TransportConfig clientTransport() {
        return TransportConfig.defaults(transport);
    }

    /** The provider the servers listen on. */
    public String transport() {
        return transport;
    }

    /** The PID of server {@code i}. */
    public synchronized long pid(int i) {
        return children[i].pid();
    }

    /** Whether server {@code i} runs. */
    public synchronized boolean isAlive(int i) {
        return children[i].isAlive();
    }

    /** The checkpoint directory of server {@code i}, or null. */
    public Path checkpointDir(int i) {
        return checkpointRoot == null ? null : checkpointRoot.resolve("server-" + i);
    }

    /** Kills server {@code i} at once (SIGKILL, no clean-up: a crash) and waits until it is gone. */
    public synchronized void kill(int i) {
        children[i].kill();
    }

    /**
     * Starts server {@code i} again (after {@link #kill}), restoring from its checkpoint directory,
     * read-only if {@code serving}; returns its new address.
     */
    public synchronized String restart(int i, boolean serving) {
        children[i].close();
        children[i] = spawn(i, serving);
        addresses[i] = awaitAddress(i);
        return addresses[i];
    }

    /**
     * Starts again, in parallel, every server that is not running (after {@link #kill}), each
     * restoring from its checkpoint directory, read-only where {@code serving} says so; returns
     * the addresses of all servers.
     */
    public synchronized List<String> restartStopped(IntPredicate serving) {
        List<Integer> started = new ArrayList<>();
        for (int i = 0; i < children.length; i++) {
            if (!children[i].isAlive()) {
                children[i].close();
                children[i] = spawn(i, serving.test(i));
                started.add(i);
            }
        }
        for (int i : started) {
            addresses[i] = awaitAddress(i);
        }
        return List.of(addresses);
    }

    /** Stops every server: SIGTERM, then SIGKILL after a grace period. */
    @Override
    public void close() {
        stopAll();
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException e) {
            // Shutting down: the hook runs (or ran) and finds the children gone.
        }
    }

    private synchronized void stopAll() {
        for (ChildJvm child : children) {
            if (child != null) {
                child.terminate();
            }
        }
        for (ChildJvm child : children) {
            if (child != null) {
                child.close();
            }
        }
    }

    private String awaitAddress(int i) {
        return children[i].expect(PsServerMain.LISTENING, START_MILLIS).substring(PsServerMain.LISTENING.length()).trim();
    }

    private ChildJvm spawn(int index, boolean serving) {
        PsServerMain.Options options = new PsServerMain.Options(0, bindHost(), transport, checkpointDir(index), serving, index,
                children.length, true, false);
        List<String> jvm = new ArrayList<>();
        jvm.add("-XX:+UseParallelGC");
        jvm.addAll(jvmOptions);
        ProcessBuilder builder = new ProcessBuilder(ChildJvm.javaCommand(jvm, PsServerMain.class.getName(),
                options.toArgs()));
        builder.environment().put(SharedSecret.ENV_SECRET, secret);
        builder.environment().remove(SharedSecret.ENV_SECRET_FILE);
        return ChildJvm.start(builder, "parameter server " + index);
    }

    /**
     * 127.0.0.1, except on shm: a loopback address of each child's own there, from this process's
     * PID and a count of children started, because shm names its region after the host and
     * numbers regions per process, so two processes on one host would otherwise collide.
     */
    private String bindHost() {
        if (!transport.equals("shm")) {
            return "127.0.0.1";
        }
        long pid = ProcessHandle.current().pid();
        int n = spawned++;
        if (n > 250) {
            throw new IllegalStateException("a cluster on shm starts 250 servers at most");
        }
        return "127." + ((pid >> 8) & 0xff) + "." + (pid & 0xff) + "." + (n + 2);
    }
}
