package dev.ferry.transport.admission;

import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * The one timer thread of every {@link HandshakeGate} and {@link DropLog} in the process. Its
 * tasks only close sockets and write log lines, so one daemon thread serves them all; a
 * cancelled deadline leaves the queue at once, so thousands of handshakes that finish in time
 * leave nothing behind.
 */
final class Deadlines {

    private static final ScheduledThreadPoolExecutor TIMER = timer();

    private Deadlines() {
    }

    private static ScheduledThreadPoolExecutor timer() {
        ScheduledThreadPoolExecutor timer = new ScheduledThreadPoolExecutor(1,
                r -> Thread.ofPlatform().daemon().name("ferry-handshake-deadlines").unstarted(r));
        timer.setRemoveOnCancelPolicy(true);
        timer.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
        return timer;
    }

    /** Runs {@code task} on the timer thread after {@code nanos}. */
    static ScheduledFuture<?> schedule(Runnable task, long nanos) {
        return TIMER.schedule(task, nanos, TimeUnit.NANOSECONDS);
    }
}
