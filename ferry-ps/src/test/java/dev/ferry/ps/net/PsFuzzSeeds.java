package dev.ferry.ps.net;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.SlotTable;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.TableStats;

/**
 * Writes the seed inputs of {@link PsRequestFuzzTest} with {@link PsDescriptor}'s encoders (run
 * from the module directory; see docs/fuzzing.md): one request per method against the fuzz
 * server's table and tensor, and one DESCRIBE and one SLOT_TABLE response.
 */
public final class PsFuzzSeeds {

    private PsFuzzSeeds() {
    }

    public static void main(String[] args) throws IOException {
        Path dir = Path.of(args.length > 0 ? args[0] : "src/test/resources/dev/ferry/ps/net/PsRequestFuzzTestInputs/request");
        Files.createDirectories(dir);
        byte[] t = "t".getBytes(StandardCharsets.UTF_8);
        byte[] d = PsRequestFuzzTest.denseName().getBytes(StandardCharsets.UTF_8);
        long[] ids = ownedIds(3);
        int dimension = 4;

        byte[] pull = new byte[(int) PsDescriptor.pullBytes(t.length, ids.length)];
        int at = PsDescriptor.writeHeader(MemorySegment.ofArray(pull), PsDescriptor.SPARSE, t, dimension, ids.length, 0);
        MemorySegment.copy(ids, 0, MemorySegment.ofArray(pull), PsDescriptor.LONG, at, ids.length);
        write(dir, "pull", PsDescriptor.PULL, pull);

        byte[] push = new byte[(int) PsDescriptor.pushBytes(t.length, ids.length, dimension)];
        MemorySegment p = MemorySegment.ofArray(push);
        at = PsDescriptor.writeHeader(p, PsDescriptor.SPARSE, t, dimension, ids.length, 0);
        MemorySegment.copy(ids, 0, p, PsDescriptor.LONG, at, ids.length);
        for (int i = 0; i < ids.length * dimension; i++) {
            p.set(PsDescriptor.FLOAT, at + ids.length * 8L + 4L * i, 0.25f * i);
        }
        write(dir, "push", PsDescriptor.PUSH, push);

        byte[] densePull = new byte[PsDescriptor.payloadOffset(d.length)];
        PsDescriptor.writeHeader(MemorySegment.ofArray(densePull), PsDescriptor.DENSE, d, 16, 8, 4);
        write(dir, "dense-pull", PsDescriptor.DENSE_PULL, densePull);

        byte[] densePush = new byte[PsDescriptor.payloadOffset(d.length) + 16 * Float.BYTES];
        MemorySegment q = MemorySegment.ofArray(densePush);
        at = PsDescriptor.writeHeader(q, PsDescriptor.DENSE, d, 16, 16, 0);
        for (int i = 0; i < 16; i++) {
            q.set(PsDescriptor.FLOAT, at + 4L * i, -0.5f * i);
        }
        write(dir, "dense-push", PsDescriptor.DENSE_PUSH, densePush);

        byte[] u = "u".getBytes(StandardCharsets.UTF_8);
        byte[] createSparse = new byte[PsDescriptor.createBytes(u.length)];
        PsDescriptor.writeCreate(MemorySegment.ofArray(createSparse), u, new TableConfig("u", 8,
                new Optimizer.Adam(0.01, 0.9, 0.999, 1e-8), Initializer.uniform(-0.1, 0.1, 7), 1000, 8));
        write(dir, "create-sparse", PsDescriptor.CREATE_TABLE, createSparse);
        byte[] e = "e".getBytes(StandardCharsets.UTF_8);
        byte[] createDense = new byte[PsDescriptor.createBytes(e.length)];
        PsDescriptor.writeCreate(MemorySegment.ofArray(createDense), e, new DenseConfig("e", 32,
                new Optimizer.Ftrl(0.1, 1, 0.01, 0.01), Initializer.normal(0, 0.1, 3)));
        write(dir, "create-dense", PsDescriptor.CREATE_TABLE, createDense);

        byte[] describeAll = new byte[PsDescriptor.HEADER];
        PsDescriptor.writeHeader(MemorySegment.ofArray(describeAll), PsDescriptor.SPARSE, new byte[0], 0, 0, 0);
        write(dir, "describe-all", PsDescriptor.DESCRIBE, describeAll);
        byte[] describeOne = new byte[PsDescriptor.payloadOffset(t.length)];
        PsDescriptor.writeHeader(MemorySegment.ofArray(describeOne), PsDescriptor.SPARSE, t, 0, 0, 0);
        write(dir, "describe-t", PsDescriptor.DESCRIBE, describeOne);
        write(dir, "slot-table", PsDescriptor.SLOT_TABLE, describeAll);
        write(dir, "checkpoint", PsDescriptor.CHECKPOINT, describeAll);
        write(dir, "routing", PsDescriptor.ROUTING, describeAll);
        byte[] moveBegin = new byte[PsDescriptor.payloadOffset(0) + 16];
        MemorySegment mb = MemorySegment.ofArray(moveBegin);
        at = PsDescriptor.writeHeader(mb, PsDescriptor.SPARSE, new byte[0], 0, 1, 0);
        mb.set(PsDescriptor.INT, at, 0); // group 0, padded to 8
        mb.set(PsDescriptor.INT, at + 8, 0); // no tables
        write(dir, "move-begin", PsDescriptor.MOVE_BEGIN, moveBegin);
        byte[] moveRows = new byte[PsDescriptor.payloadOffset(t.length)];
        PsDescriptor.writeHeader(MemorySegment.ofArray(moveRows), PsDescriptor.SPARSE, t, dimension, 0, 0);
        write(dir, "move-rows-none", PsDescriptor.MOVE_ROWS, moveRows);

        // Responses, selected past the methods.
        TableStats stats = new TableStats("t", dimension, new Optimizer.Adagrad(0.1, 0.1, 1e-8), 3, 4096, 40, 1 << 16);
        TableStats dense = new TableStats("e", 32, new Optimizer.Sgd(0.5), 1, 1, 128, 128);
        List<ServerInfo.Table> tables = List.of(new ServerInfo.Table(false, stats), new ServerInfo.Table(true, dense));
        byte[] describe = new byte[PsDescriptor.SERVER_INFO + DescribeDescriptor.tableInfoBytes(1) * 2];
        MemorySegment r = MemorySegment.ofArray(describe);
        at = DescribeDescriptor.writeServerInfo(r, new ServerInfo(null, 0, 2, false, 99, tables), 99);
        at = DescribeDescriptor.writeTableInfo(r, at, PsDescriptor.SPARSE, stats);
        DescribeDescriptor.writeTableInfo(r, at, PsDescriptor.DENSE, dense);
        write(dir, "describe-response", PsRequestFuzzTest.METHODS.length, describe);
        byte[] slots = new byte[DescribeDescriptor.slotTableBytes()];
        DescribeDescriptor.writeSlotTable(MemorySegment.ofArray(slots), SlotTable.balanced(3));
        write(dir, "slot-table-response", PsRequestFuzzTest.METHODS.length + 1, slots);
    }

    /** Ids that server 0 of 2 owns. */
    static long[] ownedIds(int n) {
        SlotTable slots = SlotTable.balanced(2);
        long[] ids = new long[n];
        for (long id = 1, i = 0; i < n; id++) {
            if (slots.serverOf(id) == 0) {
                ids[(int) i++] = id;
            }
        }
        return ids;
    }

    private static void write(Path dir, String name, dev.ferry.rpc.RpcMethod method, byte[] body) throws IOException {
        write(dir, name, List.of(PsRequestFuzzTest.METHODS).indexOf(method), body);
    }

    private static void write(Path dir, String name, int selector, byte[] body) throws IOException {
        byte[] seed = new byte[1 + body.length];
        seed[0] = (byte) selector;
        System.arraycopy(body, 0, seed, 1, body.length);
        Files.write(dir.resolve(name), seed);
    }
}
