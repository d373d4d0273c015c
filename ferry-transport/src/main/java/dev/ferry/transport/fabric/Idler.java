package dev.ferry.transport.fabric;

import dev.ferry.fabric.CompletionBatch;

/**
 * How the progress thread sleeps once spinning and polling found nothing, one per wait object:
 * the completion queue's own ({@link CompletionQueueIdler}: tcp, verbs), the {@link Doorbell}
 * that peers on this host ring (shm: {@link DoorbellIdler}), or none ({@link ParkIdler}).
 * {@link #sleep} runs on the progress thread; {@link #wake} on any.
 */
interface Idler {

    /**
     * Sleeps until work may have come: a completion, a hand-over ({@link #wake}) or, at most,
     * {@code sliceNanos} where nothing else would wake it. {@code busy} says this side's own
     * operations are in flight. Returns the completions handled while waiting (above 0: woken
     * by work).
     */
    int sleep(CompletionBatch batch, boolean busy, long sliceNanos);

    /** Wakes the progress thread from {@link #sleep}; any thread, harmless once closed. */
    void wake();

    /** The wait object is about to go: no wake touches it from now on. */
    void close();
}
