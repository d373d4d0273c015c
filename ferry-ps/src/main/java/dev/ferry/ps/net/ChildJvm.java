package dev.ferry.ps.net;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.regex.Pattern;

/**
 * A process (a parameter server, a benchmark server or worker) as a child JVM, spoken to in lines
 * over its standard streams: {@code KEYWORD [argument]} each, {@code ERROR message} for a failure. It is stopped by
 * its own PID whatever happens: {@link #close()} closes its input (children exit at end of
 * input), then sends SIGTERM, then SIGKILL after a grace period; a shutdown hook does the same
 * if this JVM exits first. Its standard error goes to this process's.
 */
public final class ChildJvm implements AutoCloseable {

    /** How long a child gets to exit after end of input, and after SIGTERM. */
    private static final long GRACE_MILLIS = 2_000;
    private static final String EOF = "\u0000EOF";
    private static final String ERROR = "ERROR";

    private final String name;
    private final Process process;
    private final Writer stdin;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final Thread hook;

    private ChildJvm(String name, Process process, String sidePrefix, Consumer<String> sideLines) {
        this.name = name;
        this.process = process;
        this.stdin = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
        this.hook = new Thread(this::stop, "ferry-bench-stop-" + process.pid());
        Runtime.getRuntime().addShutdownHook(hook);
        Thread reader = new Thread(() -> readLines(sidePrefix, sideLines), "ferry-bench-child-" + process.pid());
        reader.setDaemon(true);
        reader.start();
    }

    /** Starts {@code command}, named {@code name} in messages. */
    public static ChildJvm start(List<String> command, String name) {
        return start(command, name, null, null);
    }

    /** Starts what {@code builder} describes (its command and environment), named {@code name}. */
    public static ChildJvm start(ProcessBuilder builder, String name) {
        try {
            return new ChildJvm(name, builder.redirectError(ProcessBuilder.Redirect.INHERIT).start(), null, null);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start " + name + ": " + builder.command().getFirst(), e);
        }
    }

    /**
     * Like {@link #start(List, String)}; lines starting with {@code sidePrefix} go to
     * {@code sideLines} (on the reader thread) instead of to {@link #expect}.
     */
    public static ChildJvm start(List<String> command, String name, String sidePrefix, Consumer<String> sideLines) {
        try {
            Process process = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            return new ChildJvm(name, process, sidePrefix, sideLines);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start " + name + ": " + command.getFirst(), e);
        }
    }

    /**
     * The command that runs {@code mainClass} with {@code args} on this JVM's java and class path,
     * with native access enabled, the Vector API added (where the JDK has it) and {@code jvmOptions}
     * before the class name.
     */
    public static List<String> javaCommand(List<String> jvmOptions, String mainClass, List<String> args) {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("--enable-native-access=ALL-UNNAMED");
        if (java.lang.module.ModuleFinder.ofSystem().find("jdk.incubator.vector").isPresent()) {
            command.add("--add-modules=jdk.incubator.vector"); // the parameter server's vector kernels
        }
        command.addAll(jvmOptions);
        command.add("-cp");
        command.add(absoluteClassPath());
        command.add(mainClass);
        command.addAll(args);
        return command;
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

    private void readLines(String sidePrefix, Consumer<String> sideLines) {
        try (BufferedReader reader = new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            for (String line = reader.readLine(); line != null; line = reader.readLine()) {
                if (sidePrefix != null && line.startsWith(sidePrefix)) {
                    sideLines.accept(line);
                } else {
                    lines.add(line);
                }
            }
        } catch (IOException e) {
            // The child went away: EOF says so.
        } finally {
            lines.add(EOF);
        }
    }

    /** The name given at start. */
    public String name() {
        return name;
    }

    /** The child's PID. */
    public long pid() {
        return process.pid();
    }

    /** Whether the child still runs. */
    public boolean isAlive() {
        return process.isAlive();
    }

    /**
     * {@code base} followed by the options in the environment variable {@code FERRY_SERVER_JAVA_OPTS}
     * (space-separated), which users set to size or profile the server JVMs a command starts.
     */
    public static List<String> serverJvmOptions(List<String> base) {
        List<String> options = new ArrayList<>(base);
        String extra = System.getenv("FERRY_SERVER_JAVA_OPTS");
        if (extra != null && !extra.isBlank()) {
            options.addAll(List.of(extra.trim().split("\\s+")));
        }
        return options;
    }

    /**
     * How long to wait for a child's first line: starting a JVM and loading libfabric's providers
     * takes seconds on a loaded machine, which is not what an operation timeout is about.
     */
    public static long startMillis(long timeoutMillis) {
        return Math.max(timeoutMillis, 60_000);
    }

    /** Whether {@code line} is {@code keyword}, alone or followed by a space and an argument. */
    public static boolean is(String line, String keyword) {
        return line.equals(keyword) || line.startsWith(keyword + " ");
    }

    /**
     * Waits up to {@code timeoutMillis} for a line that {@link #is} {@code keyword} and returns
     * it whole, skipping other lines.
     *
     * @throws IllegalStateException if the child reports an {@code ERROR}, exits or stays silent
     */
    public String expect(String keyword, long timeoutMillis) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        while (true) {
            long left = deadline - System.nanoTime();
            String line;
            try {
                line = left <= 0 ? null : lines.poll(left, TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted waiting for " + name);
            }
            if (line == null) {
                throw new IllegalStateException(name + " sent no " + keyword + " within " + timeoutMillis + " ms");
            }
            if (line.equals(EOF)) {
                lines.add(EOF);
                throw new IllegalStateException(name + " exited" + exitStatus() + " before sending " + keyword);
            }
            if (is(line, ERROR)) {
                throw new IllegalStateException(name + ": " + line.substring(ERROR.length()).trim());
            }
            if (is(line, keyword)) {
                return line;
            }
        }
    }

    private String exitStatus() {
        return awaitExit(200) ? " with status " + process.exitValue() : "";
    }

    /** Sends one line to the child. */
    public synchronized void send(String line) {
        try {
            stdin.write(line);
            stdin.write('\n');
            stdin.flush();
        } catch (IOException e) {
            throw new IllegalStateException(name + " is gone" + exitStatus() + " (writing " + line.split(" ")[0] + ")", e);
        }
    }

    /** Waits up to {@code timeoutMillis} for the child to exit by itself; true if it did. */
    public boolean awaitExit(long timeoutMillis) {
        try {
            return process.waitFor(timeoutMillis, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** Asks the child to end (SIGTERM) without waiting, so that several can stop at once. */
    public void terminate() {
        if (process.isAlive()) {
            process.destroy();
        }
    }

    /** Kills the child at once (SIGKILL, no clean-up: a crash) and waits until it is gone. */
    public void kill() {
        process.destroyForcibly();
        awaitExit(GRACE_MILLIS);
    }

    /** Stops the child: end of input, then SIGTERM, then SIGKILL; returns once it is gone. */
    @Override
    public void close() {
        stop();
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException e) {
            // Already shutting down: the hook runs (or ran) and finds the child gone.
        }
    }

    private void stop() {
        try {
            stdin.close();
        } catch (IOException e) {
            // The child may be gone already.
        }
        // A child that exits at the end of its input closes its fabric itself: give it time.
        if (awaitExit(GRACE_MILLIS)) {
            return;
        }
        process.destroy();
        if (!awaitExit(GRACE_MILLIS)) {
            process.destroyForcibly();
            awaitExit(GRACE_MILLIS);
        }
    }
}
