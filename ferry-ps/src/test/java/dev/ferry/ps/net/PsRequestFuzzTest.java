package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.SlotTable;
import dev.ferry.ps.TableConfig;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.rpc.RpcMethod;
import dev.ferry.rpc.ServerCalls;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import org.junit.jupiter.api.AfterAll;

/**
 * Fuzzes every parameter-server request body through the server's own handlers (the
 * server-to-server MOVE_BEGIN and MOVE_ROWS too), and the two response bodies a client decodes
 * ({@code DESCRIBE}, {@code SLOT_TABLE}). The first byte picks the method ({@link #METHODS}
 * modulo their number plus two, then the two responses); the rest is the body. A method added
 * to {@link #METHODS} shifts the responses' selectors: remake the seeds (PsFuzzSeeds). The server is
 * server 0 of 2, with a sparse table "t" (dimension 4, Adagrad) and a dense tensor "d" (length 16)
 * that it owns, and small request limits.
 *
 * <p>A handler either answers (a pull's reply is exactly its rows, a describe's reply decodes
 * back) or throws {@link PsException}, the error that travels to the client; a response decoder
 * either returns or throws {@link PsException}. Anything else is a defect. {@code CREATE_TABLE}
 * decodes every body but creates only tensors up to 1 MiB: how much memory a client may ask
 * for is the server's policy ({@link DenseConfig#MAX_LENGTH}), not the decoder's.
 */
class PsRequestFuzzTest {

    static final RpcMethod[] METHODS = {PsDescriptor.PULL, PsDescriptor.PUSH, PsDescriptor.DENSE_PULL,
            PsDescriptor.DENSE_PUSH, PsDescriptor.CREATE_TABLE, PsDescriptor.DESCRIBE, PsDescriptor.SLOT_TABLE,
            PsDescriptor.CHECKPOINT, PsDescriptor.ROUTING, PsDescriptor.MOVE_BEGIN, PsDescriptor.MOVE_ROWS};
    static final PsConfig LIMITS = PsConfig.defaults().withRequestLimits(1024, 1 << 20);
    private static final long CREATE_LIMIT_BYTES = 1 << 20;
    private static ParameterServer ps;
    private static PsServer server;
    private static int calls;

    @FuzzTest
    void request(byte[] data) throws Exception {
        if (data.length == 0) {
            return;
        }
        int selector = (data[0] & 0xff) % (METHODS.length + 2);
        byte[] body = Arrays.copyOfRange(data, 1, data.length);
        if (selector == METHODS.length) {
            describeResponse(body);
            return;
        }
        if (selector == METHODS.length + 1) {
            slotTableResponse(body);
            return;
        }
        RpcMethod method = METHODS[selector];
        if (method.equals(PsDescriptor.CREATE_TABLE) && !smallEnoughToCreate(body)) {
            return;
        }
        PsServer s = server();
        byte[] reply;
        try {
            reply = ServerCalls.call(s.rpcServer(), method, body);
        } catch (PsException refused) {
            assertTrue(refused.getMessage().startsWith(refused.code().name() + ": "), refused::getMessage);
            return;
        }
        MemorySegment request = MemorySegment.ofArray(body);
        if (method.equals(PsDescriptor.PULL)) {
            // The rows come in the format the request names (its offset field: a PullFormat code).
            dev.ferry.ps.PullFormat format = dev.ferry.ps.PullFormat.ofCode(PsDescriptor.offset(request));
            assertEquals(format.rowsBytes(PsDescriptor.count(request), PsDescriptor.dimension(request))
                    + PsDescriptor.GENERATION_TRAILER, reply.length);
        } else if (method.equals(PsDescriptor.PUSH)) {
            assertEquals(PsDescriptor.GENERATION_TRAILER, reply.length);
        } else if (method.equals(PsDescriptor.ROUTING) || method.equals(PsDescriptor.MOVE_BEGIN)
                || method.equals(PsDescriptor.MOVE_ROWS)) {
            // Answered: the cluster's own tests check what; here, only that the body was decoded.
            return;
        } else if (method.equals(PsDescriptor.DENSE_PULL)) {
            assertEquals((long) PsDescriptor.count(request) * Float.BYTES, reply.length);
        } else if (method.equals(PsDescriptor.DESCRIBE)) {
            ServerInfo info = DescribeDescriptor.readDescribe(MemorySegment.ofArray(reply), "fuzzer:0");
            assertEquals(0, info.index());
            assertEquals(PsDescriptor.nameLength(request) == 0 ? ps.stats().size() : 1, info.tables().size());
        } else if (method.equals(PsDescriptor.SLOT_TABLE)) {
            assertEquals(ps.slotTable(),
                    DescribeDescriptor.readSlotTable(MemorySegment.ofArray(reply)));
        } else {
            assertEquals(0, reply.length);
        }
    }

    /** Decodes a CREATE_TABLE body; true unless it asks for a tensor beyond the fuzzer's memory. */
    private static boolean smallEnoughToCreate(byte[] body) {
        MemorySegment request = MemorySegment.ofArray(body);
        try {
            PsDescriptor.checkHeader(request);
            if (PsDescriptor.kind(request) == PsDescriptor.DENSE) {
                return PsDescriptor.readDense(request).bytes() <= CREATE_LIMIT_BYTES;
            }
            if (PsDescriptor.kind(request) == PsDescriptor.SPARSE) {
                PsDescriptor.readTable(request);
            }
        } catch (PsException refused) {
            // The handler refuses it the same way.
        }
        return true;
    }

    private static void describeResponse(byte[] body) {
        try {
            ServerInfo info = DescribeDescriptor.readDescribe(MemorySegment.ofArray(body), "fuzzer:0");
            assertTrue(info.tables().size() <= body.length / DescribeDescriptor.tableInfoBytes(0));
        } catch (PsException refused) {
            assertTrue(refused.code() == PsException.Code.LENGTH_MISMATCH
                    || refused.code() == PsException.Code.INVALID_ARGUMENT, refused::toString);
        }
    }

    private static void slotTableResponse(byte[] body) {
        try {
            SlotTable slots = DescribeDescriptor.readSlotTable(MemorySegment.ofArray(body));
            assertTrue(slots.serverCount() >= 1);
        } catch (PsException refused) {
            assertTrue(refused.code() == PsException.Code.LENGTH_MISMATCH
                    || refused.code() == PsException.Code.INVALID_ARGUMENT, refused::toString);
        }
    }

    /** The server, made anew every few thousand calls so that created tables and rows do not pile up. */
    private static PsServer server() {
        if (server == null || ++calls % 4096 == 0 || ps.stats().size() > 64) {
            closeServer();
            ps = ParameterServer.create(LIMITS);
            ps.createTable(new TableConfig("t", 4, new Optimizer.Adagrad(0.1, 0.1, 1e-8), Initializer.zeros(), 4096, 4));
            ps.createDense(new DenseConfig(denseName(), 16, new Optimizer.Sgd(0.5), Initializer.zeros()));
            server = PsServer.open(ps, 0, 2, null, RpcConfig.defaults().withoutAuthentication().withHandlerThreads(1));
        }
        return server;
    }

    /** A dense tensor's name that server 0 of 2 owns ("d" if it does). */
    static String denseName() {
        SlotTable slots = SlotTable.balanced(2);
        for (int i = 0; ; i++) {
            String name = i == 0 ? "d" : "d" + i;
            if (slots.serverOf(PsDescriptor.denseKey(name)) == 0) {
                return name;
            }
        }
    }

    @AfterAll
    static void closeServer() {
        if (server != null) {
            server.close();
            ps.close();
            server = null;
            ps = null;
        }
    }
}
