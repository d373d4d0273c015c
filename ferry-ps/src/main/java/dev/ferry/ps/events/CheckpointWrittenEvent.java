package dev.ferry.ps.events;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.Timespan;

/** A checkpoint was written and renamed into place. */
@Name("dev.ferry.ps.CheckpointWritten")
@Label("Checkpoint Written")
@Category({"Ferry", "Parameter Server"})
final class CheckpointWrittenEvent extends jdk.jfr.Event {
    @Label("Path")
    String path;
    @Label("Tables")
    int tables;
    @Label("Rows")
    long rows;
    @Label("Table Memory")
    @DataAmount
    long tableBytes;
    @Label("Write Time")
    @Timespan(Timespan.NANOSECONDS)
    long writeTime;
}
