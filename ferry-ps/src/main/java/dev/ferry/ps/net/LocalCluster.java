package dev.ferry.ps.net;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.IntPredicate;
import java.util.regex.Pattern;

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
    /** How long a child gets to exit after SIGTERM before it is killed. */
    private static final long GRACE_MILLIS = 3_000;

    private final String transport;
    private final Path checkpointRoot;
    private final List<String> jvmOptions;
    private final String secret;
    private final Child[] children;
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
        this.children = new Child[servers];
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
                cluster.addresses[i] = cluster.children[i].awaitAddress();
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
        return children[i].process.pid();
    }

    /** Whether server {@code i} runs. */
    public synchronized boolean isAlive(int i) {
        return children[i].process.isAlive();
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
        children[i].stop();
        children[i] = spawn(i, serving);
        addresses[i] = children[i].awaitAddress();
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
            if (!children[i].process.isAlive()) {
                children[i].stop();
                children[i] = spawn(i, serving.test(i));
                started.add(i);
            }
        }
        for (int i : started) {
            addresses[i] = children[i].awaitAddress();
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
        for (Child child : children) {
            if (child != null) {
                child.signal();
            }
        }
        for (Child child : children) {
            if (child != null) {
                child.stop();
            }
        }
    }

    private Child spawn(int index, boolean serving) {
        PsServerMain.Options options = new PsServerMain.Options(0, bindHost(), transport, checkpointDir(index), serving, index,
                children.length, true, false);
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("--enable-native-access=ALL-UNNAMED");
        command.add("-XX:+UseParallelGC");
        command.addAll(jvmOptions);
        command.add("-cp");
        command.add(absoluteClassPath());
        command.add(PsServerMain.class.getName());
        command.addAll(options.toArgs());
        ProcessBuilder builder = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT);
        builder.environment().put(SharedSecret.ENV_SECRET, secret);
        builder.environment().remove(SharedSecret.ENV_SECRET_FILE);
        try {
            return new Child(builder.start(), "parameter server " + index);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start parameter server " + index, e);
        }
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

    private static String absoluteClassPath() {
        String separator = System.getProperty("path.separator");
        List<String> entries = new ArrayList<>();
        for (String entry : System.getProperty("java.class.path").split(Pattern.quote(separator))) {
            if (!entry.isEmpty()) {
                entries.add(Path.of(entry).toAbsolutePath().toString());
            }
        }
        return String.join(separator, entries);
    }

    /** One child: its process, and the lines of its standard output. */
    private static final class Child {

        private static final String EOF = "\u0000EOF";

        final Process process;
        final String name;
        final BlockingQueue<String> lines = new LinkedBlockingQueue<>();

        Child(Process process, String name) {
            this.process = process;
            this.name = name;
            Thread reader = new Thread(this::read, "ferry-cluster-stdout-" + process.pid());
            reader.setDaemon(true);
            reader.start();
        }

        private void read() {
            try (BufferedReader in = new BufferedReader(
                    new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line = in.readLine(); line != null; line = in.readLine()) {
                    lines.add(line);
                }
            } catch (IOException e) {
                // the child went away
            } finally {
                lines.add(EOF);
            }
        }

        String awaitAddress() {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(START_MILLIS);
            while (true) {
                String line;
                try {
                    line = lines.poll(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException("interrupted waiting for " + name);
                }
                if (line == null) {
                    throw new IllegalStateException(name + " (pid " + process.pid() + ") did not listen within "
                            + START_MILLIS + " ms");
                }
                if (line.equals(EOF)) {
                    throw new IllegalStateException(name + " exited" + exitStatus() + " before listening");
                }
                if (line.startsWith(PsServerMain.LISTENING + " ")) {
                    return line.substring(PsServerMain.LISTENING.length() + 1).trim();
                }
            }
        }

        private String exitStatus() {
            try {
                if (process.waitFor(500, TimeUnit.MILLISECONDS)) {
                    return " with status " + process.exitValue();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return "";
        }

        void signal() {
            if (process.isAlive()) {
                process.destroy();
            }
        }

        void kill() {
            process.destroyForcibly();
            await(GRACE_MILLIS);
        }

        void stop() {
            try {
                process.getOutputStream().close();
            } catch (IOException e) {
                // gone already
            }
            if (!process.isAlive()) {
                return;
            }
            process.destroy();
            if (!await(GRACE_MILLIS)) {
                process.destroyForcibly();
                await(GRACE_MILLIS);
            }
        }

        private boolean await(long millis) {
            try {
                return process.waitFor(millis, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
    }
}
