package dev.ferry.transport.fabric;

import java.util.concurrent.locks.LockSupport;

import dev.ferry.fabric.CompletionBatch;

/** Without a wait object: parks for the slice; a hand-over unparks. */
final class ParkIdler implements Idler {

    private final Thread progress;

    ParkIdler(Thread progress) {
        this.progress = progress;
    }

    @Override
    public int sleep(CompletionBatch batch, boolean busy, long sliceNanos) {
        LockSupport.parkNanos(sliceNanos);
        return 0;
    }

    @Override
    public void wake() {
        LockSupport.unpark(progress);
    }

    @Override
    public void close() {
    }
}
