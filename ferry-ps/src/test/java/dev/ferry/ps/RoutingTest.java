package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RoutingTest {

    @Test
    void sequentialIdsSpreadEvenlyOverSlotsAndServers() {
        int n = 1 << 20;
        int[] perSlot = new int[Slots.COUNT];
        SlotTable table = SlotTable.balanced(10);
        int[] perServer = new int[10];
        for (long id = 0; id < n; id++) {
            perSlot[Slots.slotOf(id)]++;
            perServer[table.serverOf(id)]++;
        }
        double expected = (double) n / Slots.COUNT;
        double chiSquare = 0;
        for (int count : perSlot) {
            chiSquare += (count - expected) * (count - expected) / expected;
        }
        // 65,535 degrees of freedom: mean 65,535, standard deviation about 362.
        assertTrue(Math.abs(chiSquare - (Slots.COUNT - 1)) < 6 * 362, "chi-square " + chiSquare);
        for (int count : perServer) {
            assertEquals(n / 10.0, count, n / 10.0 * 0.02);
        }
    }

    @Test
    void growingTheClusterMovesOnlyTheSlotsItMust() {
        SlotTable four = SlotTable.balanced(4);
        SlotTable five = four.withServerCount(5);
        int moved = 0;
        for (int slot = 0; slot < Slots.COUNT; slot++) {
            if (four.serverOfSlot(slot) != five.serverOfSlot(slot)) {
                moved++;
                assertEquals(4, five.serverOfSlot(slot), "slots move only to the new server");
            }
        }
        assertEquals(Slots.COUNT / 5, moved, 1);
        for (int s = 0; s < 5; s++) {
            assertEquals(Slots.COUNT / 5.0, five.slotCount(s), 1);
        }
        SlotTable back = five.withServerCount(4);
        assertEquals(four.toArray().length, back.toArray().length);
        for (int s = 0; s < 4; s++) {
            assertEquals(Slots.COUNT / 4, back.slotCount(s));
        }
        assertEquals(five, SlotTable.of(five.toArray(), 5));
        assertThrows(PsException.class, () -> SlotTable.of(new int[10], 2));
        int[] bad = new int[Slots.COUNT];
        bad[7] = 3;
        PsException e = assertThrows(PsException.class, () -> SlotTable.of(bad, 3));
        assertTrue(e.getMessage().contains("slot 7"), e.getMessage());
    }

    @Test
    void everyLookupAgreesWithTheAssignmentForSmallAndLargeClusters() {
        SplittableRandom random = new SplittableRandom(7);
        // 256 servers: the byte-per-slot table's largest; 300: the int table.
        for (int servers : new int[] {1, 2, 256, 300}) {
            int[] assignment = new int[Slots.COUNT];
            for (int slot = 0; slot < Slots.COUNT; slot++) {
                assignment[slot] = random.nextInt(servers);
            }
            assignment[0] = servers - 1;
            SlotTable table = SlotTable.of(assignment, servers);
            for (int slot = 0; slot < Slots.COUNT; slot++) {
                assertEquals(assignment[slot], table.serverOfSlot(slot), servers + " servers, slot " + slot);
            }
            for (int server : new int[] {0, servers - 1, servers / 2}) {
                OwnedSlots owned = table.owned(server);
                assertEquals(server, owned.server());
                for (int slot = 0; slot < Slots.COUNT; slot++) {
                    assertEquals(assignment[slot] == server, owned.ownsSlot(slot), "server " + server + " slot " + slot);
                }
            }
        }
    }

    @Test
    void theOwnedSlotsNameTheFirstForeignIdAndAnUnlistedServerOwnsNothing() {
        SlotTable table = SlotTable.balanced(3);
        OwnedSlots mine = table.owned(1);
        assertTrue(mine == table.owned(1), "the same server's bitmap is kept");
        long[] ids = new long[64];
        int n = 0;
        for (long id = 0; n < ids.length; id++) {
            if (table.serverOf(id) == 1) {
                ids[n++] = id;
            }
        }
        assertEquals(-1, mine.firstForeign(ids, n));
        long foreign = 0;
        while (table.serverOf(foreign) == 1) {
            foreign++;
        }
        ids[40] = foreign;
        ids[50] = foreign;
        assertEquals(40, mine.firstForeign(ids, n));
        assertEquals(-1, mine.firstForeign(ids, 40), "only the first count ids are checked");
        assertTrue(!mine.ownsSlot(Slots.slotOf(foreign)) && mine.ownsSlot(Slots.slotOf(ids[0])));
        long[] words = mine.toWords();
        assertTrue((words[Slots.slotOf(ids[0]) >>> 6] & 1L << Slots.slotOf(ids[0])) != 0, "the words are the bitmap");
        OwnedSlots none = table.owned(-1);
        assertEquals(0, none.firstForeign(ids, n));
        assertEquals(0, countOwned(none), "a server outside the table owns no slot");
        assertTrue(table.owned(-1) == none, "an outsider's empty bitmap is kept for its next request");
        assertEquals(0, table.owned(3).firstForeign(ids, n), "a server the table does not name owns nothing");
        assertTrue(table.owned(1) == mine, "each server's bitmap is kept, whoever asked in between");
        SlotTable large = SlotTable.balanced(300);
        OwnedSlots first = large.owned(299);
        assertTrue(large.owned(299) == first && large.owned(0) != first, "each server's bitmap is kept past 256 servers too");
        assertEquals(Slots.COUNT / 300, countOwned(large.owned(299)), "server 299 of 300");
    }

    private static int countOwned(OwnedSlots owned) {
        int n = 0;
        for (int slot = 0; slot < Slots.COUNT; slot++) {
            n += owned.ownsSlot(slot) ? 1 : 0;
        }
        return n;
    }

    @Test
    void aPlanDedupesSplitsAndReassemblesWithDuplicates() {
        SlotTable slots = SlotTable.balanced(4);
        SplittableRandom random = new SplittableRandom(3);
        long[] pool = random.longs(300).toArray();
        int count = 2_000;
        long[] ids = new long[count + 5];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = pool[random.nextInt(pool.length)];
        }
        int offset = 5;
        int dim = 3;
        BatchPlan plan = BatchPlan.of(ids, offset, count, slots);
        assertEquals(count, plan.count());
        Set<Long> distinct = new LinkedHashSet<>();
        for (int i = 0; i < count; i++) {
            distinct.add(ids[offset + i]);
        }
        assertEquals(distinct.size(), plan.uniqueCount());
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate((long) count * dim * 4);
            MemorySegment gradients = arena.allocate((long) count * dim * 4);
            for (int i = 0; i < count * dim; i++) {
                gradients.set(RowLayout.FLOAT, 4L * i, i % 17 - 8);
            }
            Set<Long> seen = new HashSet<>();
            int lastServer = -1;
            for (int p = 0; p < plan.parts(); p++) {
                int server = plan.server(p);
                assertTrue(plan.server(p) > lastServer, "parts in ascending server order");
                lastServer = plan.server(p);
                long[] partIds = plan.ids(p);
                assertEquals(plan.partSize(p), partIds.length);
                List<Long> firstSeenOrder = distinct.stream().filter(id -> slots.serverOf(id) == server).toList();
                for (int k = 0; k < partIds.length; k++) {
                    assertEquals(firstSeenOrder.get(k), partIds[k]);
                    assertTrue(seen.add(partIds[k]), "each id in one part once");
                }
                MemorySegment request = arena.allocate(partIds.length * 8L);
                plan.writeIds(p, request);
                assertEquals(partIds[partIds.length - 1], request.get(RowLayout.LONG, (partIds.length - 1) * 8L));
                // The "server": row of id = (id mod 1000, part, k).
                MemorySegment rows = arena.allocate((long) partIds.length * dim * 4);
                for (int k = 0; k < partIds.length; k++) {
                    rows.set(RowLayout.FLOAT, (k * dim) * 4L, Math.floorMod(partIds[k], 1000));
                    rows.set(RowLayout.FLOAT, (k * dim + 1) * 4L, p);
                    rows.set(RowLayout.FLOAT, (k * dim + 2) * 4L, k);
                }
                plan.scatterRows(p, rows, dim, out);
                // Summed gradients per distinct id.
                MemorySegment summed = arena.allocate((long) partIds.length * dim * 4);
                plan.sumGradients(p, gradients, dim, summed);
                for (int k = 0; k < partIds.length; k++) {
                    for (int j = 0; j < dim; j++) {
                        float expected = 0;
                        for (int i = 0; i < count; i++) {
                            if (ids[offset + i] == partIds[k]) {
                                expected += gradients.get(RowLayout.FLOAT, (i * (long) dim + j) * 4);
                            }
                        }
                        assertEquals(expected, summed.get(RowLayout.FLOAT, (k * (long) dim + j) * 4));
                    }
                }
            }
            assertEquals(distinct, seen);
            for (int i = 0; i < count; i++) {
                long id = ids[offset + i];
                assertEquals(Math.floorMod(id, 1000), out.get(RowLayout.FLOAT, i * dim * 4L), "position " + i);
                int part = (int) out.get(RowLayout.FLOAT, (i * dim + 1) * 4L);
                int k = (int) out.get(RowLayout.FLOAT, (i * dim + 2) * 4L);
                assertEquals(id, plan.ids(part)[k]);
            }
            PsException small = assertThrows(PsException.class,
                    () -> plan.scatterRows(0, arena.allocate(4), dim, out));
            assertEquals(PsException.Code.LENGTH_MISMATCH, small.code());
        }
        assertEquals(0, BatchPlan.of(ids, 0, 0, slots).parts());
        assertThrows(PsException.class, () -> BatchPlan.of(ids, ids.length, 1, slots));
    }

    @Test
    void aPlanFeedsServersEndToEnd() {
        // Three in-process servers, one table each, a client batch with duplicates.
        SlotTable slots = SlotTable.balanced(3);
        Initializer init = Initializer.uniform(0, 1, 8);
        ParameterServer[] servers = new ParameterServer[3];
        try (Arena arena = Arena.ofConfined()) {
            for (int s = 0; s < 3; s++) {
                servers[s] = ParameterServer.create(PsConfig.defaults());
                servers[s].createTable(TableConfig.of("emb", 4, Optimizer.sgd(1)).withInitializer(init));
            }
            long[] ids = {5, 6, 5, 7, 1 << 20, 6, 5, 99, 100, 101};
            BatchPlan plan = BatchPlan.of(ids, 0, ids.length, slots);
            MemorySegment out = arena.allocate(ids.length * 16L);
            for (int p = 0; p < plan.parts(); p++) {
                MemorySegment response = arena.allocate(plan.partSize(p) * 16L);
                long[] partIds = plan.ids(p);
                servers[plan.server(p)].pull("emb", 4, partIds, 0, partIds.length, response);
                plan.scatterRows(p, response, 4, out);
            }
            for (int i = 0; i < ids.length; i++) {
                for (int j = 0; j < 4; j++) {
                    assertEquals(init.valueAt(ids[i], j), out.get(RowLayout.FLOAT, (i * 4L + j) * 4));
                }
            }
            long total = 0;
            for (ParameterServer server : servers) {
                total += server.describe("emb").rows();
            }
            assertEquals(7, total, "each distinct id lives on one server");
        } finally {
            for (ParameterServer server : servers) {
                if (server != null) {
                    server.close();
                }
            }
        }
    }
}
