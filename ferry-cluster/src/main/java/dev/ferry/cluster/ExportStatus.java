package dev.ferry.cluster;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

import dev.ferry.ps.net.DeltaFollower;

/**
 * A serving member's follower counters as one line on standard output, for a launcher (a test)
 * that runs it as a child process: each {@value #COMMAND} line read on standard input is
 * answered with {@code EXPORT_STATUS key=value ...}; at end of input the process exits, as with
 * {@code PsServerMain.exitOnStdinEof}.
 */
public final class ExportStatus {

    /** The command and the answer's first word. */
    public static final String COMMAND = "EXPORT_STATUS";

    private ExportStatus() {
    }

    /** The counters of {@code f} as one line. */
    public static String line(DeltaFollower f) {
        return COMMAND + " checkpointLoads=" + f.checkpointLoads() + " checkpointRows=" + f.checkpointRows()
                + " checkpointFallbacks=" + f.checkpointFallbacks() + " resyncs=" + f.resyncs() + " applied="
                + f.rowsApplied() + " older=" + f.rowsOlder() + " deleted=" + f.rowsDeleted() + " swept=" + f.rowsSwept() + " dense="
                + f.denseApplied() + " failures=" + f.failures() + " rounds=" + f.rounds();
    }

    /** The value of {@code key} in a {@link #line}. */
    public static long value(String line, String key) {
        for (String word : line.split(" ")) {
            if (word.startsWith(key + "=")) {
                return Long.parseLong(word.substring(key.length() + 1));
            }
        }
        throw new IllegalArgumentException("no " + key + " in '" + line + "'");
    }

    /** Answers {@value #COMMAND} lines on standard input until its end, then exits the process. */
    static void answerOnStdin(DeltaFollower follower, PrintStream out) {
        Thread watcher = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                for (String l = in.readLine(); l != null; l = in.readLine()) {
                    if (l.trim().equals(COMMAND)) {
                        synchronized (out) {
                            out.println(line(follower));
                            out.flush();
                        }
                    }
                }
            } catch (IOException e) {
                // parent gone
            }
            System.exit(0);
        }, "ferry-server-stdin");
        watcher.setDaemon(true);
        watcher.start();
    }
}
