package dev.ferry.ps.events;

import java.nio.file.Path;

import dev.ferry.transport.events.EventGate;

/** Emits the parameter server's flight-recorder events; a branch when they are off. */
public final class PsEvents {

    private static final EventGate WRITTEN = new EventGate(CheckpointWrittenEvent.class);
    private static final EventGate RESTORED = new EventGate(CheckpointRestoredEvent.class);

    private PsEvents() {
    }

    /** A checkpoint was written, having started at {@code startNanos}. */
    public static void checkpointWritten(Path checkpoint, int tables, long rows, long reservedBytes, long startNanos) {
        if (!WRITTEN.enabled()) {
            return;
        }
        CheckpointWrittenEvent e = new CheckpointWrittenEvent();
        e.path = String.valueOf(checkpoint);
        e.tables = tables;
        e.rows = rows;
        e.tableBytes = reservedBytes;
        e.writeTime = System.nanoTime() - startNanos;
        e.commit();
    }

    /**
     * A checkpoint was loaded ({@code problem} null) or rejected ({@code problem} says why),
     * having started at {@code startNanos}.
     */
    public static void checkpointRestored(Path checkpoint, int tables, long rows, boolean readOnly, String problem,
            long startNanos) {
        if (!RESTORED.enabled()) {
            return;
        }
        CheckpointRestoredEvent e = new CheckpointRestoredEvent();
        e.path = String.valueOf(checkpoint);
        e.tables = tables;
        e.rows = rows;
        e.readOnly = readOnly;
        e.verified = problem == null;
        e.problem = problem;
        e.loadTime = System.nanoTime() - startNanos;
        e.commit();
    }
}
