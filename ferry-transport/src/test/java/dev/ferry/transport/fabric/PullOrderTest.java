package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/**
 * The order a paced receiver pulls chunks in ({@link RendezvousPuller#nextIndex}): the message
 * with the fewest bytes left first, the oldest among equals, and every
 * {@link RendezvousPuller#OLDEST_EVERY}th chunk to the oldest message, played out chunk by chunk.
 */
class PullOrderTest {

    private static final long CHUNK = 110 * 1024;

    private static InboundFrame message(long length) {
        return new InboundFrame(null, 0, null, false, length, null);
    }

    /** Issues one chunk by the puller's rule; the message finished by it, or null. */
    private static InboundFrame step(List<InboundFrame> pulls, long[] chunksPosted) {
        int index = RendezvousPuller.nextIndex(pulls, chunksPosted[0]);
        InboundFrame m = pulls.get(index);
        m.requested += Math.min(CHUNK, m.length - m.requested);
        chunksPosted[0]++;
        if (m.requested == m.length) {
            pulls.remove(index);
            return m;
        }
        return null;
    }

    @Test
    void equalMessagesFinishOneAfterAnotherInArrivalOrder() {
        List<InboundFrame> arrived = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            arrived.add(message(1 << 20));
        }
        List<InboundFrame> pulls = new ArrayList<>(arrived);
        long[] chunks = {0};
        List<InboundFrame> finished = new ArrayList<>();
        List<Long> finishedAt = new ArrayList<>();
        while (!pulls.isEmpty()) {
            InboundFrame done = step(pulls, chunks);
            if (done != null) {
                finished.add(done);
                finishedAt.add(chunks[0]);
            }
        }
        assertEquals(arrived, finished, "arrival order");
        long perMessage = ((1 << 20) + CHUNK - 1) / CHUNK;
        // The oldest-first turns only ever serve the message already being pulled here, so each
        // finishes after its own chunks: the first after 10, not after 16 x 10 as round-robin would.
        for (int i = 0; i < finished.size(); i++) {
            assertEquals((i + 1) * perMessage, finishedAt.get(i), "message " + i);
        }
    }

    @Test
    void aShortMessageArrivingLateOvertakesTheLongOnes() {
        List<InboundFrame> pulls = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            pulls.add(message(4 << 20));
        }
        long[] chunks = {0};
        for (int i = 0; i < 5; i++) {
            assertEquals(null, step(pulls, chunks));
        }
        InboundFrame small = message(200 * 1024);
        pulls.add(small);
        InboundFrame first = null;
        while (first == null) {
            first = step(pulls, chunks);
        }
        assertEquals(small, first);
        assertTrue(chunks[0] <= 5 + 3, "the short message took " + (chunks[0] - 5) + " chunks to finish");
    }

    @Test
    void theOldestMessageIsServedUnderAStreamOfShorterOnes() {
        List<InboundFrame> pulls = new ArrayList<>();
        InboundFrame big = message(8 << 20);
        pulls.add(big);
        long[] chunks = {0};
        int shortOnes = 0;
        while (big.requested < big.length && chunks[0] < 10_000) {
            if (pulls.size() < 3) {
                pulls.add(message(CHUNK)); // always a shorter message waiting
                shortOnes++;
            }
            step(pulls, chunks);
        }
        assertEquals(big.length, big.requested, "the oldest message starved");
        long bigChunks = (big.length + CHUNK - 1) / CHUNK;
        assertTrue(chunks[0] <= bigChunks * RendezvousPuller.OLDEST_EVERY,
                "the oldest message got " + bigChunks + " of " + chunks[0] + " chunks; " + shortOnes + " short ones");
    }

    @Test
    void tiesGoToTheOldest() {
        List<InboundFrame> pulls = new ArrayList<>(List.of(message(3 * CHUNK), message(CHUNK), message(CHUNK)));
        assertEquals(1, RendezvousPuller.nextIndex(pulls, 0));
        pulls.get(0).requested = 2 * CHUNK;
        assertEquals(0, RendezvousPuller.nextIndex(pulls, 0), "equal bytes left: the oldest");
        assertEquals(0, RendezvousPuller.nextIndex(pulls, RendezvousPuller.OLDEST_EVERY - 1));
    }
}
