package dev.ferry.bench.ps;

import java.util.List;

/**
 * Where a worker's closed-loop threads wait while its run is paused ({@code bench fetch
 * --interleave}): the command thread {@linkplain #pause pauses} and returns once every thread
 * waits here, then {@linkplain #open opens} the gate again. The flag is read by the threads
 * between operations; the count of waiting threads is guarded by the gate's monitor.
 */
final class PauseGate {

    private volatile boolean paused;
    /** Threads waiting at the gate; guarded by {@code this}. */
    private int waiting;

    /** Whether the run is paused: a thread that sees it calls {@link #await} before its next operation. */
    boolean paused() {
        return paused;
    }

    /** On a loop thread: waits while the run is paused (or until the thread is interrupted). */
    synchronized void await() {
        waiting++;
        notifyAll();
        try {
            while (paused) {
                wait();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            waiting--;
        }
    }

    /** On the command thread: pauses, and returns once every one of {@code threads} still alive waits at the gate. */
    synchronized void pause(List<Thread> threads) throws InterruptedException {
        paused = true;
        while (waiting < threads.stream().filter(Thread::isAlive).count()) {
            wait(100);
        }
    }

    /** Lets the threads go on (to run again, or to find the run stopped). */
    synchronized void open() {
        paused = false;
        notifyAll();
    }
}
