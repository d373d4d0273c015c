package dev.ferry.transport.fabric;

import java.util.concurrent.locks.LockSupport;

import dev.ferry.fabric.CompletionBatch;

/** Without a wait object: parks for the slice; a hand-over unparks. */
final class ParkIdler implements Idler {

    private final ProgressLoop loop;
    private final Thread progress;

    ParkIdler(ProgressLoop loop, Thread progress) {
        this.loop = loop;
        this.progress = progress;
    }

    @Override
    public int sleep(CompletionBatch batch, boolean busy, long sliceNanos) {
        loop.lend(); // a caller may post or poll meanwhile
        try {
            LockSupport.parkNanos(sliceNanos);
        } finally {
            loop.takeBack();
        }
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
