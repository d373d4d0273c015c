package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/** The command queue alone: bounded, first in first out, nothing lost between producers. */
class ManyToOneArrayQueueTest {

    @Test
    void refusesWhenFullAndTakesInOrder() {
        ManyToOneArrayQueue<Integer> queue = new ManyToOneArrayQueue<>(4);
        assertTrue(queue.isEmpty());
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < 4; i++) {
                assertTrue(queue.offer(i));
            }
            assertFalse(queue.offer(4));
            for (int i = 0; i < 4; i++) {
                assertEquals(i, queue.poll());
            }
            assertNull(queue.poll());
            assertTrue(queue.isEmpty());
        }
    }

    @Test
    void manyProducersLoseNothingAndKeepEachOnesOrder() throws InterruptedException {
        int producers = 4;
        int each = 200_000;
        ManyToOneArrayQueue<long[]> queue = new ManyToOneArrayQueue<>(64);
        List<Thread> threads = new ArrayList<>();
        for (int p = 0; p < producers; p++) {
            long id = p;
            threads.add(Thread.ofPlatform().start(() -> {
                for (long i = 0; i < each; i++) {
                    long[] item = {id, i};
                    while (!queue.offer(item)) {
                        Thread.yield(); // five threads on two cores: let a preempted producer publish
                    }
                }
            }));
        }
        long[] next = new long[producers];
        for (long taken = 0; taken < (long) producers * each; ) {
            long[] item = queue.poll();
            if (item == null) {
                Thread.yield(); // the slot's producer may be preempted between its claim and its publish
                continue;
            }
            assertEquals(next[(int) item[0]]++, item[1], "producer " + item[0]);
            taken++;
        }
        for (Thread t : threads) {
            t.join();
        }
        assertNull(queue.poll());
        assertTrue(queue.isEmpty());
    }
}
