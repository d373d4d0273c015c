package dev.ferry.metrics;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;

import dev.ferry.ps.net.DeltaFollower;
import dev.ferry.ps.net.ExportService;

/**
 * The live export's meters: on a training server the rows and bytes it sent to followers, on a
 * serving server the rows it merged, its resyncs and failed polls, and its lag (the age of its
 * oldest source's last complete poll). Read when scraped; nothing on the data path.
 */
public final class ExportMeters {

    private ExportMeters() {
    }

    /** Binds a training server's export. */
    public static void bind(MeterRegistry registry, ExportService export) {
        FunctionCounter.builder("ferry.export.rows.exported", export, ExportService::rowsExported)
                .description("Rows sent to serving followers").register(registry);
        FunctionCounter.builder("ferry.export.bytes.exported", export, ExportService::bytesExported)
                .description("Bytes of rows sent to serving followers").baseUnit("bytes").register(registry);
        FunctionCounter.builder("ferry.export.polls", export, ExportService::polls)
                .description("Followers' polls answered (each seals a tick)").register(registry);
        FunctionCounter.builder("ferry.export.refused", export, ExportService::refused)
                .description("Malformed export requests refused").register(registry);
        Gauge.builder("ferry.export.log.entries", export, e -> e.log().entries())
                .description("Ids in the record of changed rows").register(registry);
        Gauge.builder("ferry.export.log.memory", export, e -> e.log().bytes())
                .description("Heap bytes of the record of changed rows").baseUnit("bytes").register(registry);
        Gauge.builder("ferry.export.log.tombstones", export, e -> e.log().tombstones())
                .description("Deletions remembered (until the retention passes)").register(registry);
        FunctionCounter.builder("ferry.export.tombstones.exported", export, ExportService::tombstonesExported)
                .description("Tombstones (rows deleted) sent to followers").register(registry);
        FunctionCounter.builder("ferry.export.dense.exported", export, ExportService::denseExported)
                .description("Dense tensors sent to followers, whole").register(registry);
    }

    /** Binds a serving server's follower. */
    public static void bind(MeterRegistry registry, DeltaFollower follower) {
        Gauge.builder("ferry.export.lag", follower, f -> f.lagMillis() / 1e3)
                .description("Age of the oldest training server's last complete poll").baseUnit("seconds")
                .register(registry);
        FunctionCounter.builder("ferry.export.rows.applied", follower, DeltaFollower::rowsApplied)
                .description("Exported rows merged here").register(registry);
        FunctionCounter.builder("ferry.export.rows.older", follower, DeltaFollower::rowsOlder)
                .description("Exported rows not newer than the copy here (repeats)").register(registry);
        FunctionCounter.builder("ferry.export.bytes.received", follower, DeltaFollower::bytesReceived)
                .description("Bytes of exported rows received").baseUnit("bytes").register(registry);
        FunctionCounter.builder("ferry.export.resyncs", follower, DeltaFollower::resyncs)
                .description("Polls that started from tick 0: a full resync (no usable checkpoint)").register(registry);
        FunctionCounter.builder("ferry.export.poll.failures", follower, DeltaFollower::failures)
                .description("Polls that failed (a training server unreachable, a page refused)").register(registry);
        FunctionCounter.builder("ferry.export.pages.rejected", follower, DeltaFollower::rejectedPages)
                .description("Pages refused as malformed").register(registry);
        FunctionCounter.builder("ferry.export.checkpoint.loads", follower, DeltaFollower::checkpointLoads)
                .description("Catch-ups from a training server's checkpoint plus later deltas").register(registry);
        FunctionCounter.builder("ferry.export.checkpoint.rows", follower, DeltaFollower::checkpointRows)
                .description("Rows merged from checkpoints").register(registry);
        FunctionCounter.builder("ferry.export.checkpoint.fallbacks", follower, DeltaFollower::checkpointFallbacks)
                .description("Catch-ups that could not use a checkpoint (a full resync instead)").register(registry);
        FunctionCounter.builder("ferry.export.rows.deleted", follower, DeltaFollower::rowsDeleted)
                .description("Rows deleted here by tombstones (evicted on training)").register(registry);
        FunctionCounter.builder("ferry.export.rows.swept", follower, DeltaFollower::rowsSwept)
                .description("Rows deleted here after a catch-up: deleted on training while out of touch").register(registry);
        FunctionCounter.builder("ferry.export.dense.applied", follower, DeltaFollower::denseApplied)
                .description("Dense tensors merged here, whole").register(registry);
    }
}
