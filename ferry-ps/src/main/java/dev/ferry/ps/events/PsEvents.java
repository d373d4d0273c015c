package dev.ferry.ps.events;

import java.nio.file.Path;

import jdk.jfr.EventType;
import jdk.jfr.FlightRecorder;

/** Emits the parameter server's flight-recorder events; a branch when they are off. */
public final class PsEvents {

    /**
     * The event types, registered with the flight recorder on first use: only once it runs (see
     * {@link #on}), because registering the first one initializes the recorder, which takes long
     * enough (hundreds of milliseconds on a loaded machine) to stall the thread that asks.
     */
    private static final class Types {
        static final EventType WRITTEN = EventType.getEventType(CheckpointWrittenEvent.class);
        static final EventType RESTORED = EventType.getEventType(CheckpointRestoredEvent.class);
    }

    /** True if a recording could want an event: the recorder runs (a cheap static read until it does). */
    private static boolean on() {
        return FlightRecorder.isInitialized();
    }

    private PsEvents() {
    }

    /** A checkpoint was written, having started at {@code startNanos}. */
    public static void checkpointWritten(Path checkpoint, int tables, long rows, long reservedBytes, long startNanos) {
        if (!on() || !Types.WRITTEN.isEnabled()) {
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
        if (!on() || !Types.RESTORED.isEnabled()) {
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
