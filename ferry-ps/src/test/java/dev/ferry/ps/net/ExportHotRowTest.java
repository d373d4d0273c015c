package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

import org.junit.jupiter.api.Test;

import dev.ferry.ps.ExportRows;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableConfig;

/**
 * A row pushed all the time is changed after nearly every seal, before its page is read: it
 * still reaches serving within a few polls, no older there than training was a poll before
 * (a page names every row changed after the cursor, also those changed after the seal).
 */
class ExportHotRowTest extends ExportTestBase {

    @Test
    void aRowPushedWithoutPauseStillReachesServing() throws Exception {
        Training t = training(null);
        t.ps().createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
        push(t.ps(), ids(500, 3), 1f);
        long hot = ids(500, 3)[250];
        SparseTable trained = t.ps().table("t");
        Serving s = serving();
        AtomicBoolean stop = new AtomicBoolean();
        Thread pusher = Thread.ofPlatform().name("hot-row-pusher").start(() -> {
            while (!stop.get()) {
                push(t.ps(), new long[] {hot}, 1f);
                LockSupport.parkNanos(50_000);
            }
        });
        try (DeltaFollower f = follow(s, t)) {
            await(() -> f.rowsApplied() >= 499, "the first catch-up");
            for (int check = 0; check < 3; check++) {
                long before = ExportRows.steps(trained, hot);
                long rounds = f.rounds();
                await(() -> f.rounds() >= rounds + 4, "four more polls");
                long served = ExportRows.steps(s.ps().table("t"), hot);
                assertTrue(served >= before, "serving's copy of the hot row has " + served + " steps; training had "
                        + before + " four polls ago");
            }
        } finally {
            stop.set(true);
            pusher.join();
        }
    }
}
