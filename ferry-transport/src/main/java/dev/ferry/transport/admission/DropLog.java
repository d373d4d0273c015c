package dev.ferry.transport.admission;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * Warnings about dropped connections, rate limited: the first {@link #BURST} of each
 * {@link #WINDOW_NANOS} are logged in full with their reason; the rest are counted by kind and
 * summed up in one line when the window ends, so a flood of bad connections costs a few lines
 * and not a disk. Every drop is counted whether logged or not ({@link #dropped()}).
 *
 * <p>Thread-safe: any thread that drops a connection calls {@link #drop}.
 */
public final class DropLog {

    /** Full lines per window. */
    static final int BURST = 10;
    /** The window of the rate limit. */
    static final long WINDOW_NANOS = TimeUnit.SECONDS.toNanos(10);

    private final System.Logger log;
    private final String what;
    /** What is dropped, in the summary line: "connections", "frames". */
    private final String things;
    private final Map<String, Long> suppressed = new TreeMap<>();
    private long windowStart = System.nanoTime();
    private int logged;
    private long dropped;
    private boolean flushScheduled;

    /** A log that says "{@code what} dropped ..." on {@code logger}. */
    public DropLog(System.Logger logger, String what) {
        this(logger, what, "connections");
    }

    /** A log that says "{@code what} dropped ..." on {@code logger}, and sums up dropped {@code things}. */
    public DropLog(System.Logger logger, String what, String things) {
        this.log = logger;
        this.what = what;
        this.things = things;
    }

    /**
     * Records a dropped connection: {@code kind} is a short stable word (the summary counts by
     * it: "deadline", "evicted", "refused", "closed", "garbage"...), {@code detail} the full
     * reason with the remote address.
     */
    public void drop(String kind, String detail) {
        String line = null;
        String summary = null;
        boolean schedule = false;
        synchronized (this) {
            dropped++;
            long now = System.nanoTime();
            if (now - windowStart >= WINDOW_NANOS) {
                summary = takeSummary();
                windowStart = now;
                logged = 0;
            }
            if (logged < BURST) {
                logged++;
                line = what + " dropped " + detail;
            } else {
                suppressed.merge(kind, 1L, Long::sum);
                if (!flushScheduled) {
                    flushScheduled = true;
                    schedule = true;
                }
            }
        }
        if (summary != null) {
            log.log(System.Logger.Level.WARNING, summary);
        }
        if (line != null) {
            log.log(System.Logger.Level.WARNING, line);
        }
        if (schedule) {
            // The summary of a flood that stops must not wait for the next drop.
            Deadlines.schedule(this::flush, WINDOW_NANOS);
        }
    }

    /** Connections dropped so far, logged or not. */
    public synchronized long dropped() {
        return dropped;
    }

    private void flush() {
        String summary;
        synchronized (this) {
            flushScheduled = false;
            summary = takeSummary();
            windowStart = System.nanoTime();
            logged = 0;
        }
        if (summary != null) {
            log.log(System.Logger.Level.WARNING, summary);
        }
    }

    /** Under the lock: the line for the suppressed drops, or null, and a fresh count. */
    private String takeSummary() {
        if (suppressed.isEmpty()) {
            return null;
        }
        long total = 0;
        StringBuilder kinds = new StringBuilder();
        for (Map.Entry<String, Long> e : suppressed.entrySet()) {
            total += e.getValue();
            kinds.append(kinds.isEmpty() ? "" : ", ").append(e.getKey()).append(' ').append(e.getValue());
        }
        suppressed.clear();
        return what + " dropped " + total + " more " + things + " without a line each (" + kinds + ")";
    }
}
