package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import org.junit.jupiter.api.Test;

/** {@link CookieMap} against a {@link HashMap} through random puts, gets and removes, and its refusals. */
class CookieMapTest {

    @Test
    void agreesWithAHashMapThroughGrowthAndRemovals() {
        CookieMap<Long> map = new CookieMap<>(16);
        Map<Long, Long> model = new HashMap<>();
        SplittableRandom random = new SplittableRandom(42);
        long next = 1;
        List<Long> live = new ArrayList<>();
        for (int step = 0; step < 200_000; step++) {
            int op = random.nextInt(10);
            if (op < 5 || live.isEmpty()) {
                // Sequential cookies as the send pump makes them, now and then a far one.
                long cookie = random.nextInt(50) == 0 ? next + random.nextLong(1L << 40) : next;
                next = cookie + 1;
                Long value = cookie * 3;
                map.put(cookie, value);
                model.put(cookie, value);
                live.add(cookie);
            } else if (op < 8) {
                long cookie = live.remove(random.nextInt(live.size()));
                assertEquals(model.remove(cookie), map.remove(cookie), "remove " + cookie);
            } else {
                long cookie = random.nextBoolean() && !live.isEmpty() ? live.get(random.nextInt(live.size()))
                        : random.nextLong(1, next + 10);
                assertEquals(model.get(cookie), map.get(cookie), "get " + cookie);
            }
            assertEquals(model.size(), map.size());
        }
        for (long cookie : live) {
            assertEquals(model.get(cookie), map.get(cookie));
        }
    }

    @Test
    void removeIfTakesTheMatchesInCookieOrderAndKeepsTheRest() {
        CookieMap<String> map = new CookieMap<>(4);
        for (long c = 1; c <= 100; c++) {
            map.put(c, c % 3 == 0 ? "peer-a" : "peer-b");
        }
        List<String> removed = map.removeIf("peer-a"::equals);
        assertEquals(33, removed.size());
        assertEquals(67, map.size());
        for (long c = 1; c <= 100; c++) {
            if (c % 3 == 0) {
                assertNull(map.get(c));
            } else {
                assertEquals("peer-b", map.get(c));
            }
        }
        // Cookie order: the values are equal here, so check it on distinct ones.
        CookieMap<Long> ordered = new CookieMap<>(4);
        for (long c = 64; c >= 1; c--) {
            ordered.put(c, c);
        }
        List<Long> all = ordered.removeIf(v -> true);
        for (int i = 0; i < all.size(); i++) {
            assertEquals(i + 1L, all.get(i));
        }
        assertEquals(0, ordered.size());
    }

    @Test
    void refusesCookieZeroAndADuplicate() {
        CookieMap<Object> map = new CookieMap<>(4);
        Object value = new Object();
        map.put(7, value);
        assertThrows(IllegalArgumentException.class, () -> map.put(0, value));
        assertThrows(IllegalStateException.class, () -> map.put(7, value));
        assertSame(value, map.get(7));
        assertNull(map.get(0));
        assertNull(map.remove(0));
        assertNull(map.remove(8));
    }
}
