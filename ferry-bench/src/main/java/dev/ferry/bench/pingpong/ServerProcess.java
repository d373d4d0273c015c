package dev.ferry.bench.pingpong;

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

/**
 * A benchmark server running as a child process, spoken to in {@link ControlLine}s. It is
 * stopped by its own PID whatever happens: {@link #close()} asks it to end (SIGTERM), then kills
 * it (SIGKILL) after a grace period, and a shutdown hook does the same if this JVM exits first.
 * The child also ends by itself when its standard input closes.
 */
public final class ServerProcess implements AutoCloseable {

    /** How long a child gets to exit after SIGTERM before it is killed. */
    private static final long GRACE_MILLIS = 2_000;
    private static final String EOF = "\u0000EOF";

    private final Process process;
    private final Writer stdin;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final Thread hook;
    private final String name;

    private ServerProcess(Process process, String name) {
        this.process = process;
        this.name = name;
        this.stdin = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
        this.hook = new Thread(this::stop, "ferry-stop-" + process.pid());
        Runtime.getRuntime().addShutdownHook(hook);
        Thread reader = new Thread(this::readLines, "ferry-server-stdout-" + process.pid());
        reader.setDaemon(true);
        reader.start();
    }

    /** Starts {@code command}; its standard error goes to this process's. */
    public static ServerProcess start(List<String> command, String name) {
        ProcessBuilder builder = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT);
        try {
            return new ServerProcess(builder.start(), name);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start " + name + ": " + command.get(0), e);
        }
    }

    /**
     * The command that runs {@code mainClass} with {@code args} on this JVM's java and class path,
     * with native access enabled and {@code jvmOptions} before the class name.
     */
    public static List<String> javaCommand(List<String> jvmOptions, String mainClass, List<String> args) {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("--enable-native-access=ALL-UNNAMED");
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
        for (String entry : System.getProperty("java.class.path").split(java.util.regex.Pattern.quote(separator))) {
            if (!entry.isEmpty()) {
                entries.add(Path.of(entry).toAbsolutePath().toString());
            }
        }
        return String.join(separator, entries);
    }

    private void readLines() {
        try (BufferedReader reader = new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            for (String line = reader.readLine(); line != null; line = reader.readLine()) {
                lines.add(line);
            }
        } catch (IOException e) {
            // The child went away; EOF below says so.
        } finally {
            lines.add(EOF);
        }
    }

    /** The child's PID. */
    public long pid() {
        return process.pid();
    }

    /** Whether the child is still running. */
    public boolean isAlive() {
        return process.isAlive();
    }

    /**
     * How long to wait for a child's first line: starting a JVM and loading libfabric's providers
     * takes seconds on a loaded machine, which is not what an operation timeout is about.
     */
    public static long startMillis(long timeoutMillis) {
        return Math.max(timeoutMillis, 60_000);
    }

    /**
     * Waits up to {@code timeoutMillis} for a line starting with {@code keyword} and returns it,
     * skipping other lines.
     *
     * @throws IllegalStateException if the child reports an error, exits, or stays silent
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
                throw new IllegalStateException("interrupted waiting for the " + name);
            }
            if (line == null) {
                throw new IllegalStateException(name + " sent no " + keyword + " within " + timeoutMillis + " ms");
            }
            if (line.equals(EOF)) {
                lines.add(EOF);
                throw new IllegalStateException(name + " exited" + exitStatus() + " before sending " + keyword);
            }
            if (ControlLine.is(line, ControlLine.ERROR)) {
                throw new IllegalStateException(name + ": " + ControlLine.argument(line));
            }
            if (ControlLine.is(line, keyword)) {
                return line;
            }
        }
    }

    private String exitStatus() {
        try {
            if (process.waitFor(200, TimeUnit.MILLISECONDS)) {
                return " with status " + process.exitValue();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return "";
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

    /**
     * Stops the child if it still runs: end of input, then SIGTERM, then SIGKILL after a grace
     * period; returns once it is gone.
     */
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
        // A child that exits at the end of its input closes its fabric itself: give it a moment.
        if (awaitExit(300)) {
            return;
        }
        process.destroy();
        if (!awaitExit(GRACE_MILLIS)) {
            process.destroyForcibly();
            awaitExit(GRACE_MILLIS);
        }
    }
}
