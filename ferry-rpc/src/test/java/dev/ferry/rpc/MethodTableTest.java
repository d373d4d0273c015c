package dev.ferry.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

/** The server's method lookup: every registered id found, nothing else, through many rebuilds. */
class MethodTableTest {

    @Test
    void findsEveryRegisteredIdAndNoOther() {
        MethodTable<String> table = new MethodTable<>();
        assertNull(table.get(0), "empty");
        int[] ids = new int[300];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = i % 3 == 0 ? 0x5000 + i : i % 3 == 1 ? -i * 1024 : i << 16; // spread and clustered ids
            assertNull(table.putIfAbsent(ids[i], "m" + ids[i]));
            for (int j = 0; j <= i; j++) {
                assertEquals("m" + ids[j], table.get(ids[j]), "id " + ids[j] + " after " + (i + 1) + " registrations");
            }
        }
        assertNull(table.get(7));
        assertNull(table.get(0x5001), "0x5001 was never registered");
        assertEquals("m" + ids[3], table.putIfAbsent(ids[3], "other"), "the first registration stays");
        assertEquals("m" + ids[3], table.get(ids[3]));
        table.put(ids[3], "replaced");
        assertEquals("replaced", table.get(ids[3]));
        assertEquals("m" + ids[4], table.get(ids[4]));
    }
}
