package dev.ferry.bench.pingpong;

import java.lang.management.ManagementFactory;

/** The JVM's count of bytes allocated by a thread (HotSpot's TLAB accounting). */
final class Allocation {

    private static final com.sun.management.ThreadMXBean THREADS = threads();

    private Allocation() {
    }

    private static com.sun.management.ThreadMXBean threads() {
        if (ManagementFactory.getThreadMXBean() instanceof com.sun.management.ThreadMXBean bean
                && bean.isThreadAllocatedMemorySupported()) {
            bean.setThreadAllocatedMemoryEnabled(true);
            return bean;
        }
        return null;
    }

    /** Bytes the calling thread allocated so far, or -1 if the JVM does not count them. */
    static long currentThread() {
        return THREADS == null ? -1 : THREADS.getCurrentThreadAllocatedBytes();
    }

    /** Bytes the thread {@code id} allocated so far, or -1 if the JVM does not count them. */
    static long ofThread(long id) {
        return THREADS == null ? -1 : THREADS.getThreadAllocatedBytes(id);
    }

    /** Bytes per operation, or -1 if unknown. */
    static double perOperation(long bytes, long operations) {
        return bytes < 0 || operations <= 0 ? -1 : (double) bytes / operations;
    }
}
