package dev.ferry.memory;

import java.io.PrintWriter;
import java.io.StringWriter;

/**
 * A buffer that became unreachable without being released.
 *
 * @param buffer         a description of the leaked buffer (pool, size, where in which slab)
 * @param allocationSite the call stack of its allocation, or {@code null} when the allocation
 *                       was not sampled (see {@link LeakDetection})
 */
public record LeakReport(String buffer, Throwable allocationSite) {

    /** The report as text: the buffer, then the allocation stack when known. */
    public String describe() {
        if (allocationSite == null) {
            return "LEAK: " + buffer + " was not released before it became unreachable;"
                    + " its allocation site was not sampled (use LeakDetection.PARANOID to see it)";
        }
        StringWriter trace = new StringWriter();
        allocationSite.printStackTrace(new PrintWriter(trace));
        return "LEAK: " + buffer + " was not released before it became unreachable. Allocated at:\n"
                + trace;
    }
}
