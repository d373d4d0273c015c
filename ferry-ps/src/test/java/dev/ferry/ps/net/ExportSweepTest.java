package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

import org.junit.jupiter.api.Test;

import dev.ferry.ps.ExportLog;
import dev.ferry.ps.ExportRows;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableConfig;

/**
 * A serving server out of touch for longer than training remembers its deletions: its cursor is
 * refused ({@code FORGOTTEN}), it catches up (from training's checkpoint, or from tick 0), and the
 * rows training deleted meanwhile, which no page can name any more, are swept: serving ends with
 * exactly training's rows, none kept that training deleted, none lost that it has.
 */
class ExportSweepTest extends ExportTestBase {

    private static final long RETENTION = TimeUnit.SECONDS.toNanos(1);

    /** A follower's source list that the test can hold shut while the poller waits in it (its cursors kept). */
    private static final class Gate implements Supplier<List<String>> {
        private final List<String> sources;
        private final Semaphore open = new Semaphore(1);
        private final Semaphore waiting = new Semaphore(0);

        Gate(String source) {
            this.sources = List.of(source);
        }

        @Override
        public List<String> get() {
            waiting.release();
            try {
                open.acquire();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return List.of();
            }
            open.release();
            waiting.drainPermits();
            return sources;
        }

        /** Returns once the poller waits in the gate, before it polls again. */
        void shut() throws InterruptedException {
            open.acquire();
            waiting.drainPermits();
            assertTrue(waiting.tryAcquire(20, TimeUnit.SECONDS), "the follower's poller reaching the gate");
        }

        void reopen() {
            open.release();
        }
    }

    @Test
    void aFullResyncSweepsTheRowsDeletedWhileTheFollowerWasOutOfTouch() throws Exception {
        sweepsAfterForgetting(null, false);
    }

    @Test
    void aCatchUpFromACheckpointSweepsTheRowsDeletedBeforeIt() throws Exception {
        sweepsAfterForgetting(dir, false);
    }

    /** Rows changed while the catch-up pages are read come in the poll after it: none is swept. */
    @Test
    void rowsPushedThroughTheCatchUpAreNeverSwept() throws Exception {
        sweepsAfterForgetting(null, true);
    }

    private void sweepsAfterForgetting(Path checkpoints, boolean pushing) throws Exception {
        AtomicLong clock = new AtomicLong(System.nanoTime());
        ParameterServer tps = ParameterServer.create(PsConfig.defaults());
        PsServer tserver = PsServer.open(tps, 0, 1, checkpoints, rpc());
        ExportService export = ExportService.attach(tserver, new ExportLog(tps, RETENTION, clock::get));
        String address = tserver.listen(config("tcp"));
        track(tps, tserver);
        tps.createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
        long[] first = ids(1_500, 7);
        push(tps, first, 1f);
        Serving s = serving();
        Gate gate = new Gate(address);
        try (DeltaFollower f = DeltaFollower.start(s.server(), gate, rpc(), config("tcp"), 20)) {
            await(() -> equal(tps, s.ps()), "serving holding training's first rows");
            assertEquals(0, f.rowsSwept(), "nothing to sweep after the first catch-up");
            long resyncsBefore = f.resyncs() + f.checkpointLoads();

            gate.shut();
            // Out of touch: training deletes every third row of the first batch and makes new
            // rows, and its clock passes the deletions' retention, so no page can name them.
            SparseTable trained = tps.table("t");
            int deleted = 0;
            for (int i = 0; i < first.length; i += 3) {
                assertTrue(ExportRows.evict(trained, first[i]));
                deleted++;
            }
            long[] fresh = new long[100];
            for (int i = 0; i < fresh.length; i++) {
                fresh[i] = 1_000_000 + i; // none of the first batch's ids
            }
            push(tps, fresh, 2f);
            clock.addAndGet(RETENTION + 1);
            if (checkpoints != null) {
                tps.checkpoint(checkpoints); // sealed after the deletions were forgotten: usable
            }
            assertEquals(1_500, s.ps().table("t").rows(), "serving still holds the deleted rows");
            AtomicBoolean stop = new AtomicBoolean();
            Thread pusher = Thread.ofPlatform().name("kept-rows-pusher").start(() -> {
                long[] kept = new long[10];
                for (int round = 0; pushing && !stop.get(); round++) {
                    for (int i = 0; i < kept.length; i++) {
                        int k = (round * 37 + i * 101) % first.length;
                        kept[i] = first[k % 3 == 0 ? k + 1 : k]; // never a deleted one
                    }
                    push(tps, kept, 0.5f);
                    java.util.concurrent.locks.LockSupport.parkNanos(200_000);
                }
            });
            gate.reopen();
            if (pushing) {
                await(() -> f.rowsSwept() > 0, "the sweep, under pushes");
                Thread.sleep(100);
            }
            stop.set(true);
            pusher.join();
            gate.reopen();

            // The sweep's count is added after its last deletion: wait for both.
            await(() -> f.rowsSwept() > 0 && equal(tps, s.ps()), "the sweep, and serving holding exactly training's"
                    + " rows again");
            assertEquals(trained.rows(), s.ps().table("t").rows());
            assertEquals(deleted, f.rowsSwept(), "rows swept: each deleted while out of touch, no other");
            assertTrue(f.resyncs() + f.checkpointLoads() > resyncsBefore, "a catch-up after FORGOTTEN");
            if (checkpoints != null) {
                assertTrue(f.checkpointLoads() >= 1, "caught up from the checkpoint: " + f.lastFallback());
            }
            assertEquals(0, f.rejectedPages());
            assertEquals(0, export.tombstonesExported(), "the deletions were forgotten before any page could carry them");
        }
    }
}
