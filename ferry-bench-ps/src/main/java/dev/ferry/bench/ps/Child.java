package dev.ferry.bench.ps;

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
import java.util.regex.Pattern;

/**
 * A benchmark process (server or worker) as a child JVM on this JVM's java and class path,
 * spoken to in lines over its standard streams. It is stopped by its own PID whatever happens:
 * {@link #close()} closes its input (children exit at end of input), then sends SIGTERM, then
 * SIGKILL after a grace period; a shutdown hook does the same if this JVM exits first.
 * {@code PROGRESS} lines are not queued: the latest one is kept in {@link #progress()}.
 */
final class Child implements AutoCloseable {

    private static final long GRACE_MILLIS = 3_000;
    private static final String EOF = "\u0000EOF";
    private static final String PROGRESS = "PROGRESS ";

    private final String name;
    private final Process process;
    private final Writer stdin;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final Thread hook;
    private volatile long progress;

    private Child(String name, Process process) {
        this.name = name;
        this.process = process;
        this.stdin = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
        this.hook = new Thread(this::stop, "ferry-bench-stop-" + process.pid());
        Runtime.getRuntime().addShutdownHook(hook);
        Thread reader = new Thread(this::readLines, "ferry-bench-child-" + process.pid());
        reader.setDaemon(true);
        reader.start();
    }

    /** Starts {@code mainClass} with {@code args} in a JVM with {@code jvmOptions}. */
    static Child start(String name, Class<?> mainClass, List<String> jvmOptions, List<String> args) {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("--enable-native-access=ALL-UNNAMED");
        command.add("-XX:+UseParallelGC");
        command.addAll(jvmOptions);
        command.add("-cp");
        command.add(absoluteClassPath());
        command.add(mainClass.getName());
        command.addAll(args);
        try {
            return new Child(name, new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start " + name + ": " + command.getFirst(), e);
        }
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

    private void readLines() {
        try (BufferedReader reader = new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            for (String line = reader.readLine(); line != null; line = reader.readLine()) {
                if (line.startsWith(PROGRESS)) {
                    try {
                        progress = Long.parseLong(line.substring(PROGRESS.length()).trim());
                    } catch (NumberFormatException e) {
                        // not ours
                    }
                } else {
                    lines.add(line);
                }
            }
        } catch (IOException e) {
            // the child went away: EOF says so
        } finally {
            lines.add(EOF);
        }
    }

    String name() {
        return name;
    }

    long pid() {
        return process.pid();
    }

    /** The number in the child's latest {@code PROGRESS} line. */
    long progress() {
        return progress;
    }

    /**
     * Waits for a line starting with {@code keyword} and returns the rest of it, skipping others.
     *
     * @throws IllegalStateException if the child reports an error, exits or stays silent
     */
    String expect(String keyword, long timeoutMillis) {
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
                throw new IllegalStateException(name + " exited" + exitStatus() + " before " + keyword);
            }
            if (line.startsWith("ERROR ")) {
                throw new IllegalStateException(name + ": " + line.substring(6));
            }
            if (line.equals(keyword) || line.startsWith(keyword + " ")) {
                return line.substring(keyword.length()).trim();
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

    /** Sends one line to the child. */
    synchronized void send(String line) {
        try {
            stdin.write(line);
            stdin.write('\n');
            stdin.flush();
        } catch (IOException e) {
            throw new IllegalStateException(name + " is gone" + exitStatus(), e);
        }
    }

    /** Stops the child: end of input, then SIGTERM, then SIGKILL; returns once it is gone. */
    @Override
    public void close() {
        stop();
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException e) {
            // shutting down already: the hook finds the child gone
        }
    }

    private void stop() {
        try {
            stdin.close();
        } catch (IOException e) {
            // gone already
        }
        try {
            if (process.waitFor(GRACE_MILLIS, TimeUnit.MILLISECONDS)) {
                return;
            }
            process.destroy();
            if (!process.waitFor(GRACE_MILLIS, TimeUnit.MILLISECONDS)) {
                process.destroyForcibly();
                process.waitFor(GRACE_MILLIS, TimeUnit.MILLISECONDS);
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }
}
