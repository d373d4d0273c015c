package dev.ferry.bench.ps;

import java.util.Arrays;

/**
 * The operations a second that the progress line shows while a benchmark measures, from the
 * workers' own {@code PROGRESS <operations> <nanos>} reports: each worker's count over its own
 * clock since its previous report, summed. The driver reads the reports once a second while the
 * workers write them every {@link #REPORT_MILLIS}, so every reading finds a fresh report; a rate from the
 * driver's clock alone showed 0 and then twice the rate whenever a report came just after a
 * reading. One instance per measured phase, used by the driver's thread.
 */
final class ProgressRate {

    /** How often a measuring worker reports: well under the driver's second between readings. */
    static final long REPORT_MILLIS = 250;

    /** One report: operations since measuring began, and the worker's nanoseconds since then. */
    record Report(long operations, long nanos) {
        static final Report NONE = new Report(0, 0);

        /**
         * The report in a line's rest ({@code <operations> <nanos>}), or null if it is not one
         * (an older worker's {@code <operations>} alone included: no clock, no rate).
         */
        static Report parse(String rest) {
            String[] words = rest.trim().split("\\s+");
            if (words.length != 2) {
                return null;
            }
            try {
                long operations = Long.parseLong(words[0]);
                long nanos = Long.parseLong(words[1]);
                return operations < 0 || nanos < 0 ? null : new Report(operations, nanos);
            } catch (NumberFormatException e) {
                return null;
            }
        }
    }

    private final Report[] last;

    ProgressRate(int workers) {
        last = new Report[workers];
        Arrays.fill(last, Report.NONE);
    }

    /**
     * The summed rate since the previous call, from each worker's latest report ({@code latest[i]}
     * for worker {@code i}); a worker with no report since then adds nothing.
     */
    double update(Report[] latest) {
        if (latest.length != last.length) {
            throw new IllegalArgumentException(latest.length + " reports for " + last.length + " workers");
        }
        double rate = 0;
        for (int i = 0; i < latest.length; i++) {
            Report now = latest[i];
            Report before = last[i];
            if (now.nanos() > before.nanos() && now.operations() >= before.operations()) {
                rate += (now.operations() - before.operations()) / ((now.nanos() - before.nanos()) / 1e9);
            }
            last[i] = now;
        }
        return rate;
    }
}
