package dev.ferry.ps.net;

/**
 * Whether a member server may serve at all: a server cut off from the cluster's coordination
 * (its ZooKeeper connection suspended) stops acknowledging pushes at once, since its groups may
 * be promoted elsewhere any moment, and stops serving pulls after a grace period shorter than
 * its session, before anyone else can have been promoted (no stale reads beyond it). Refusals
 * are {@code WRONG_SERVER}: nothing applied, the client retries (at the new primary once the
 * table changed, here once the connection is back). Open by default; thread-safe.
 */
public final class ServingGate {

    private static final int OPEN = 0;
    private static final int NO_PUSHES = 1;
    private static final int CLOSED = 2;

    private volatile int state = OPEN;

    /** Serves everything again. */
    public void open() {
        state = OPEN;
    }

    /** Refuses pushes from now on (pulls still served). */
    public void stopPushes() {
        if (state == OPEN) {
            state = NO_PUSHES;
        }
    }

    /** Refuses pushes and pulls from now on. */
    public void stopReads() {
        state = CLOSED;
    }

    /** Whether pushes are served. */
    public boolean pushesOpen() {
        return state == OPEN;
    }

    /** Whether pulls are served. */
    public boolean readsOpen() {
        return state != CLOSED;
    }

    void checkPushes(long generation) {
        if (state != OPEN) {
            throw PsDescriptor.wrongServer(generation, "this server is cut off from the cluster's coordination and"
                    + " acknowledges no push until it is back; the push was not applied");
        }
    }

    void checkReads(long generation) {
        if (state == CLOSED) {
            throw PsDescriptor.wrongServer(generation, "this server has been cut off from the cluster's coordination"
                    + " for longer than its grace period and serves nothing until it is back");
        }
    }
}
