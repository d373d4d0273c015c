package dev.ferry.bench.ps;

import java.util.ArrayList;
import java.util.List;

import dev.ferry.ps.net.ChildJvm;

/**
 * A benchmark server or worker process ({@link ChildJvm}) on this JVM's java and class path.
 * {@code PROGRESS} lines are not queued: the latest one is kept in {@link #progress()}.
 */
final class Child implements AutoCloseable {

    private static final String PROGRESS = "PROGRESS ";

    private final ChildJvm jvm;
    private volatile ProgressRate.Report progress = ProgressRate.Report.NONE;

    private Child(String name, List<String> command) {
        this.jvm = ChildJvm.start(command, name, PROGRESS, this::onProgress);
    }

    /** Starts {@code mainClass} with {@code args} in a JVM with {@code jvmOptions}. */
    static Child start(String name, Class<?> mainClass, List<String> jvmOptions, List<String> args) {
        return start(name, List.of(), mainClass, jvmOptions, args);
    }

    /** {@link #start(String, Class, List, List)} behind {@code prefix} (such as {@code ip netns exec <ns>}, which execs the JVM). */
    static Child start(String name, List<String> prefix, Class<?> mainClass, List<String> jvmOptions, List<String> args) {
        List<String> options = new ArrayList<>();
        options.add("-XX:+UseParallelGC");
        options.addAll(jvmOptions);
        List<String> command = new ArrayList<>(prefix);
        command.addAll(ChildJvm.javaCommand(options, mainClass.getName(), args));
        return new Child(name, command);
    }

    private void onProgress(String line) {
        ProgressRate.Report report = ProgressRate.Report.parse(line.substring(PROGRESS.length()));
        if (report != null) {
            progress = report;
        }
    }

    String name() {
        return jvm.name();
    }

    long pid() {
        return jvm.pid();
    }

    /** The child's latest {@code PROGRESS} report (operations and its clock since measuring began). */
    ProgressRate.Report progress() {
        return progress;
    }

    /**
     * Waits for a line starting with {@code keyword} and returns the rest of it, skipping others.
     *
     * @throws IllegalStateException if the child reports an error, exits or stays silent
     */
    String expect(String keyword, long timeoutMillis) {
        return jvm.expect(keyword, timeoutMillis).substring(keyword.length()).trim();
    }

    /** Sends one line to the child. */
    void send(String line) {
        jvm.send(line);
    }

    /** Stops the child: end of input, then SIGTERM, then SIGKILL; returns once it is gone. */
    @Override
    public void close() {
        jvm.close();
    }
}
