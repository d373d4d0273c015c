package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

import dev.ferry.ps.Admission;
import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.PullFormat;
import dev.ferry.ps.TableConfig;
import dev.ferry.rpc.RemoteException;
import dev.ferry.rpc.RpcMethod;

/**
 * The parameter server's methods and the layouts of their request and response bodies (the
 * bytes after the RPC header of {@code RpcDescriptor}). Every integer and float is
 * little-endian; names are UTF-8, zero-padded to a multiple of 8 bytes so that ids and rows
 * that follow stay 8-byte aligned in the buffer.
 *
 * <p>Every request starts with the same 32-byte header and the table's name:
 * <pre>
 *   0       1       2               4               8              12              16
 *   +-------+-------+---------------+---------------+---------------+---------------+
 *   |version| kind  | name length   | dimension     | count         | offset        |
 *   +-------+-------+---------------+---------------+---------------+---------------+
 *  16                                              24                              32
 *   | the client's routing generation (i64)         | push dedupe id (i64), else 0  |
 *   +-----------------------------------------------+-------------------------------+
 *   | name: UTF-8, zero-padded to a multiple of 8 bytes (absent if the length is 0) |
 *   +-------------------------------------------------------------------------------+
 *   | the method's payload                                                          |
 *   +-------------------------------------------------------------------------------+
 * </pre>
 * The generation is that of the {@link RoutingTable} the client routed by; the answers to
 * {@code PULL} and {@code PUSH} end with the server's generation ({@value #GENERATION_TRAILER}
 * bytes, i64), so that a client learns of a newer table on its next call. A server that does not
 * own an id answers {@code WRONG_SERVER} naming its generation ({@link #wrongServerGeneration}).
 * The dedupe id stays the same when the client retries a push at another server.
 *
 * <pre>
 *  method        kind  dimension       count        offset  payload                    response
 *  PULL          0     row width       ids          format  count x i64 ids            count rows in the format,
 *                                                                                      generation i64
 *  PUSH          0     row width       ids          0       count x i64 ids,           generation i64
 *                                                           count rows of dimension f32
 *  DENSE_PULL    1     tensor length   weights      first   none                       count f32
 *  DENSE_PUSH    1     tensor length   weights      0       count f32 (the whole tensor) empty
 *  CREATE_TABLE  0|1   dimension|len   max rows     shards  {@link #CREATE_BODY} bytes     empty
 *  DESCRIBE      0     0               0            0       none (an empty name: all)  server info, tables
 *  SLOT_TABLE    0     0               0            0       none                       server count i32,
 *                                                                                      65,536 x u16 server
 *  CHECKPOINT    0     0               0            0       none                       UTF-8 path written
 *  ROUTING       0     0               0            0       none                       {@link RoutingTable} bytes,
 *                                                                                      then limits: max ids i32,
 *                                                                                      4 reserved, max bytes i64
 *  MOVE_BEGIN    0     0               groups       0       count x i32 groups (padded empty
 *                                                           to 8), tables i32, 4 reserved,
 *                                                           per table: length i32, 4 reserved,
 *                                                           a CREATE_TABLE body padded to 8
 *  MOVE_ROWS     0     row width       rows         0       count whole rows of one    empty
 *                                                           table (RowTransfer layout)
 * </pre>
 * The server-to-server methods carry the move's id in the dedupe field of the header.
 *
 * <p>The body of {@code CREATE_TABLE} after the name ({@value #CREATE_BODY} bytes, then the
 * optional {@value #CREATE_EXTENSION} + {@value #EVICTION_EXTENSION} of a sparse table's pull
 * format, {@link Admission} and eviction) is drawn in {@code CreateTableDescriptor}, which
 * encodes it; the answers of {@code DESCRIBE} and {@code SLOT_TABLE} in
 * {@code DescribeDescriptor}.
 *
 * <p>{@code PULL}'s {@code offset} field is the {@link PullFormat} code of the answer's rows
 * (0 f32: {@code count x dimension x 4} bytes; 1 f16 and 2 bf16: 2 bytes per weight; 3 int8: per
 * row an f32 scale then one byte per weight); see {@code docs/pull-formats.md}.
 *
 * <p>Errors travel as the RPC layer's remote errors: the class is {@link PsException}'s and the
 * message starts with the {@link PsException.Code} name and {@code ": "}, which
 * {@link #toPsException} turns back into a {@link PsException} with that code.
 */
public final class PsDescriptor {

    /** Layout version of these bodies. */
    public static final byte VERSION = 2;

    /** Gathers rows of a sparse table; idempotent (a pull may create rows, with the same values every time). */
    public static final RpcMethod PULL = RpcMethod.idempotent(0x5001);
    /** Applies one optimizer step per id; runs at most once per call. */
    public static final RpcMethod PUSH = RpcMethod.atMostOnce(0x5002);
    /** Reads a range of a dense tensor; idempotent. */
    public static final RpcMethod DENSE_PULL = RpcMethod.idempotent(0x5003);
    /** Applies one optimizer step to a whole dense tensor; at most once. */
    public static final RpcMethod DENSE_PUSH = RpcMethod.atMostOnce(0x5004);
    /** Creates a table or tensor; at most once, so a retry answers with the first outcome. */
    public static final RpcMethod CREATE_TABLE = RpcMethod.atMostOnce(0x5005);
    /** The server's place in the cluster and its tables; idempotent. */
    public static final RpcMethod DESCRIBE = RpcMethod.idempotent(0x5006);
    /** The slot table the server enforces; idempotent. */
    public static final RpcMethod SLOT_TABLE = RpcMethod.idempotent(0x5007);
    /** Writes a checkpoint into the server's checkpoint directory; at most once. */
    public static final RpcMethod CHECKPOINT = RpcMethod.atMostOnce(0x5008);
    /** The routing table the server enforces, and its request limits; idempotent. */
    public static final RpcMethod ROUTING = RpcMethod.idempotent(0x5009);
    /**
     * Server to server: slot groups start moving to the callee, which creates the tables it lacks
     * and resets its rows of those groups; at most once (a late retry must not reset rows again).
     */
    public static final RpcMethod MOVE_BEGIN = RpcMethod.atMostOnce(0x500A);
    /** Server to server: whole rows of moving groups, merged by step count; idempotent. */
    public static final RpcMethod MOVE_ROWS = RpcMethod.idempotent(0x500B);

    /** Bytes of the common request header. */
    public static final int HEADER = 32;
    public static final int VERSION_OFFSET = 0;
    public static final int KIND_OFFSET = 1;
    public static final int NAME_LENGTH_OFFSET = 2;
    public static final int DIMENSION_OFFSET = 4;
    public static final int COUNT_OFFSET = 8;
    public static final int OFFSET_OFFSET = 12;
    public static final int GENERATION_OFFSET = 16;
    public static final int DEDUPE_OFFSET = 24;
    /** Bytes of the server's generation at the end of a {@code PULL} or {@code PUSH} answer. */
    public static final int GENERATION_TRAILER = 8;
    /** Bytes of the limits after the routing table in a {@code ROUTING} answer. */
    public static final int LIMITS = 16;

    /** {@code kind}: a sparse table. */
    public static final byte SPARSE = 0;
    /** {@code kind}: a dense tensor. */
    public static final byte DENSE = 1;

    /** Bytes of the {@code CREATE_TABLE} body after the name, without the extension. */
    public static final int CREATE_BODY = 64;
    /** Bytes after {@link #CREATE_BODY} that carry a sparse table's pull format and admission. */
    public static final int CREATE_EXTENSION = 16;
    /** Bytes after {@link #CREATE_EXTENSION} that carry a sparse table's {@link dev.ferry.ps.Eviction}. */
    public static final int EVICTION_EXTENSION = 32;
    /** Bytes of the server info at the start of a {@code DESCRIBE} response. */
    public static final int SERVER_INFO = 24;
    /** Bytes of one table's figures in a {@code DESCRIBE} response, after its header and name. */
    public static final int TABLE_INFO = 72;

    static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfDouble DOUBLE = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private PsDescriptor() {
    }

    // ------------------------------------------------------------------------------------------
    // Header

    /** Bytes the name takes on the wire: its UTF-8 length rounded up to a multiple of 8. */
    public static int paddedNameBytes(int nameLength) {
        return (nameLength + 7) & ~7;
    }

    /** Bytes from the start of a body to the payload. */
    public static int payloadOffset(int nameLength) {
        return HEADER + paddedNameBytes(nameLength);
    }

    /** The UTF-8 bytes of a table name, checked for the wire. */
    public static byte[] nameBytes(String name) {
        byte[] bytes = name.getBytes(StandardCharsets.UTF_8);
        if (bytes.length == 0 || bytes.length > 0xFFFF) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "a table name has 1 to 65,535 UTF-8 bytes: '"
                    + name + "'");
        }
        return bytes;
    }

    /** Writes the header and the padded name; returns the payload offset. */
    public static int writeHeader(MemorySegment body, byte kind, byte[] name, int dimension, int count, int offset) {
        body.set(ValueLayout.JAVA_BYTE, VERSION_OFFSET, VERSION);
        body.set(ValueLayout.JAVA_BYTE, KIND_OFFSET, kind);
        body.set(SHORT, NAME_LENGTH_OFFSET, (short) name.length);
        body.set(INT, DIMENSION_OFFSET, dimension);
        body.set(INT, COUNT_OFFSET, count);
        body.set(INT, OFFSET_OFFSET, offset);
        body.set(LONG, GENERATION_OFFSET, 0L);
        body.set(LONG, DEDUPE_OFFSET, 0L);
        MemorySegment.copy(name, 0, body, ValueLayout.JAVA_BYTE, HEADER, name.length);
        int padded = paddedNameBytes(name.length);
        if (padded > name.length) {
            body.asSlice(HEADER + name.length, padded - name.length).fill((byte) 0);
        }
        return HEADER + padded;
    }

    /**
     * Checks that {@code body} holds a header of this version and the whole name.
     *
     * @throws PsException {@code INVALID_ARGUMENT} if not
     */
    public static void checkHeader(MemorySegment body) {
        if (body.byteSize() < HEADER) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "a request of " + body.byteSize()
                    + " bytes is shorter than the " + HEADER + "-byte header");
        }
        byte version = body.get(ValueLayout.JAVA_BYTE, VERSION_OFFSET);
        if (version != VERSION) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "request layout version " + version
                    + "; this server speaks " + VERSION);
        }
        if (body.byteSize() < payloadOffset(nameLength(body))) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "a request of " + body.byteSize()
                    + " bytes is too short for its " + nameLength(body) + "-byte name");
        }
    }

    public static byte kind(MemorySegment body) {
        return body.get(ValueLayout.JAVA_BYTE, KIND_OFFSET);
    }

    public static int nameLength(MemorySegment body) {
        return Short.toUnsignedInt(body.get(SHORT, NAME_LENGTH_OFFSET));
    }

    public static int dimension(MemorySegment body) {
        return body.get(INT, DIMENSION_OFFSET);
    }

    public static int count(MemorySegment body) {
        return body.get(INT, COUNT_OFFSET);
    }

    public static int offset(MemorySegment body) {
        return body.get(INT, OFFSET_OFFSET);
    }

    /** The routing generation the client sent. */
    public static long generation(MemorySegment body) {
        return body.get(LONG, GENERATION_OFFSET);
    }

    /** The push's dedupe id (0 if none). */
    public static long dedupeId(MemorySegment body) {
        return body.get(LONG, DEDUPE_OFFSET);
    }

    /** Stamps a written header with the client's routing generation and a push's dedupe id. */
    public static void stamp(MemorySegment body, long generation, long dedupeId) {
        body.set(LONG, GENERATION_OFFSET, generation);
        body.set(LONG, DEDUPE_OFFSET, dedupeId);
    }

    /** The server's generation at the end of a {@code PULL} or {@code PUSH} answer, or -1 if it has none. */
    public static long trailerGeneration(MemorySegment answer) {
        long size = answer.byteSize();
        return size < GENERATION_TRAILER ? -1 : answer.get(LONG, size - GENERATION_TRAILER);
    }

    /**
     * The table name of a checked header, decoded as UTF-8; a name this thread met lately comes
     * back as the same instance, with nothing allocated ({@link TableNames}).
     */
    public static String name(MemorySegment body) {
        return TableNames.decode(body, HEADER, nameLength(body));
    }

    // ------------------------------------------------------------------------------------------
    // Sizes of the data requests

    /** Bytes of a {@code PULL} body. */
    public static long pullBytes(int nameLength, int count) {
        return payloadOffset(nameLength) + (long) count * Long.BYTES;
    }

    /** Bytes of a {@code PUSH} body. */
    public static long pushBytes(int nameLength, int count, int dimension) {
        return pullBytes(nameLength, count) + rowsBytes(count, dimension);
    }

    /** Bytes of {@code count} rows of {@code dimension} f32. */
    public static long rowsBytes(int count, int dimension) {
        return (long) count * dimension * Float.BYTES;
    }

    // ------------------------------------------------------------------------------------------
    // CREATE_TABLE

    /** Bytes of a {@code CREATE_TABLE} body for a name of {@code nameLength} UTF-8 bytes. */
    public static int createBytes(int nameLength) {
        return payloadOffset(nameLength) + CREATE_BODY + CREATE_EXTENSION + EVICTION_EXTENSION;
    }

    /** Encodes a sparse table's configuration ({@code CreateTableDescriptor}). */
    public static void writeCreate(MemorySegment body, byte[] name, TableConfig table) {
        CreateTableDescriptor.writeCreate(body, name, table);
    }

    /** Encodes a dense tensor's configuration. */
    public static void writeCreate(MemorySegment body, byte[] name, DenseConfig tensor) {
        CreateTableDescriptor.writeCreate(body, name, tensor);
    }

    /** Decodes a sparse table's configuration (the values are checked by {@link TableConfig}). */
    public static TableConfig readTable(MemorySegment body) {
        return CreateTableDescriptor.readTable(body);
    }

    /** Decodes a dense tensor's configuration. */
    public static DenseConfig readDense(MemorySegment body) {
        return CreateTableDescriptor.readDense(body);
    }

    // ------------------------------------------------------------------------------------------
    // Routing errors and placement

    /** A {@code WRONG_SERVER} error naming the server's generation, for {@link #wrongServerGeneration}. */
    public static PsException wrongServer(long generation, String message) {
        return new PsException(PsException.Code.WRONG_SERVER, "[generation " + generation + "] " + message);
    }

    /** The server's generation named by a {@code WRONG_SERVER} error, or -1 if it names none. */
    public static long wrongServerGeneration(PsException e) {
        String m = e.getMessage();
        int at = m == null ? -1 : m.indexOf("[generation ");
        if (e.code() != PsException.Code.WRONG_SERVER || at < 0) {
            return -1;
        }
        int end = m.indexOf(']', at);
        try {
            return Long.parseLong(m.substring(at + 12, end));
        } catch (RuntimeException notANumber) {
            return -1;
        }
    }

    /** The slot that places a dense tensor: the slot of a 64-bit FNV-1a hash of its name. */
    public static long denseKey(String name) {
        long h = 0xcbf29ce484222325L;
        for (byte b : name.getBytes(StandardCharsets.UTF_8)) {
            h = (h ^ (b & 0xff)) * 0x100000001b3L;
        }
        return h;
    }

    // ------------------------------------------------------------------------------------------
    // Errors

    /** The exception a handler throws for {@code e}: the code travels at the start of the message. */
    static PsException toWire(PsException e) {
        return new PsException(e.code(), e.code().name() + ": " + e.getMessage());
    }

    /**
     * The {@link PsException} a remote error stands for, naming the server; null if the handler
     * failed with something else.
     */
    public static PsException toPsException(RemoteException e, String server) {
        if (!PsException.class.getName().equals(e.remoteClass()) || e.remoteMessage() == null) {
            return null;
        }
        String message = e.remoteMessage();
        int colon = message.indexOf(": ");
        if (colon < 0) {
            return null;
        }
        PsException.Code code;
        try {
            code = PsException.Code.valueOf(message.substring(0, colon));
        } catch (IllegalArgumentException unknown) {
            return null;
        }
        return new PsException(code, "server " + server + ": " + message.substring(colon + 2), e);
    }
}
