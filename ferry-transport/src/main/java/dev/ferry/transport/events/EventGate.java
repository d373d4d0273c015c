package dev.ferry.transport.events;

import jdk.jfr.Event;
import jdk.jfr.EventType;
import jdk.jfr.FlightRecorder;

/**
 * Whether a recording wants one flight-recorder event type: the emitters of every Ferry module
 * ask one of these before they make an event, so with no recording (or the event off) a call
 * costs a static read and a branch and allocates nothing.
 *
 * <p>The event type is registered on first use and only once the recorder runs, because
 * registering the first type initializes the recorder, which takes long enough (hundreds of
 * milliseconds on a loaded machine) to stall the thread that asks. Any thread may ask.
 */
public final class EventGate {

    private final Class<? extends Event> event;
    /** Registered lazily; a benign race registers the same type twice at worst. */
    private volatile EventType type;

    /** A gate for the events of class {@code event}. */
    public EventGate(Class<? extends Event> event) {
        this.event = event;
    }

    /** True if a running recording has this event type enabled. */
    public boolean enabled() {
        if (!FlightRecorder.isInitialized()) {
            return false;
        }
        EventType t = type;
        if (t == null) {
            t = EventType.getEventType(event);
            type = t;
        }
        return t.isEnabled();
    }
}
