package dev.ferry.ps.events;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Timespan;

/** A checkpoint was loaded at start, or rejected because it did not verify. */
@Name("dev.ferry.ps.CheckpointRestored")
@Label("Checkpoint Restored")
@Category({"Ferry", "Parameter Server"})
@StackTrace(false)
final class CheckpointRestoredEvent extends jdk.jfr.Event {
    @Label("Path")
    String path;
    @Label("Tables")
    int tables;
    @Label("Rows")
    long rows;
    @Label("Read Only")
    boolean readOnly;
    @Label("Verified")
    @Description("False if the checkpoint was rejected (then Problem says why) and an older one tried")
    boolean verified;
    @Label("Problem")
    String problem;
    @Label("Load Time")
    @Timespan(Timespan.NANOSECONDS)
    long loadTime;
}
