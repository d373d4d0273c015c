package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

import dev.ferry.ps.Admission;
import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.PullFormat;
import dev.ferry.ps.SlotTable;
import dev.ferry.ps.Slots;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.TableStats;
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
 * <p>The body of {@code CREATE_TABLE} after the name, {@value #CREATE_BODY} bytes:
 * <pre>
 *   0               4               8              16              24              32
 *   +---------------+---------------+---------------+---------------+---------------+
 *   | optimizer kind| init kind     | optimizer parameters: 4 x f64                 |
 *   +---------------+---------------+---------------+---------------+---------------+
 *  40              48              56              64
 *   | init: 2 x f64 (low/mean, high/stddev)         | init seed i64 |
 *   +---------------+---------------+---------------+---------------+
 *  64              68              72              80
 *   | pull format   | admission kind| admission parameter f64       |
 *   +---------------+---------------+-------------------------------+
 *  80              88              96             100             104             112
 *   | eviction TTL ns i64 (0 none)  | capacity i64 (0 none)         | policy i32    | 4 reserved    | margin f64    |
 *   +-------------------------------+-------------------------------+---------------+---------------+---------------+
 * </pre>
 * The last {@value #CREATE_EXTENSION} + {@value #EVICTION_EXTENSION} bytes (a sparse table's default
 * {@link PullFormat} code and its {@link Admission}: kind 0 always, 1 after a count (the parameter:
 * count + cells x 2^8), 2 with a probability; then its eviction, policy 0 least recently updated,
 * 1 least frequently used) may be absent, from older clients: a 64-byte body stands for f32 and
 * admit-always, and a body without the last 32 bytes for no eviction.
 *
 * <p>{@code PULL}'s {@code offset} field is the {@link PullFormat} code of the answer's rows
 * (0 f32: {@code count x dimension x 4} bytes; 1 f16 and 2 bf16: 2 bytes per weight; 3 int8: per
 * row an f32 scale then one byte per weight); see {@code docs/pull-formats.md}.
 *
 * <p>A {@code DESCRIBE} response: {@value #SERVER_INFO} bytes of server info (index i32, server
 * count i32, flags i32 with bit 0 read-only, tables i32, slot-table hash i32, 4 reserved), then per
 * table a request-style header (kind, name length, dimension) and name, followed by
 * {@value #TABLE_INFO} bytes: rows, capacity rows, bytes per row, reserved bytes (4 x i64), the
 * optimizer kind i32, the table's default pull format code i32, and the optimizer's 4
 * parameters (f64).
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

    private static final int OPT_SGD = 1;
    private static final int OPT_ADAGRAD = 2;
    private static final int OPT_ADAM = 3;
    private static final int OPT_FTRL = 4;
    private static final int INIT_ZEROS = 1;
    private static final int INIT_UNIFORM = 2;
    private static final int INIT_NORMAL = 3;

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

    /** The table name of a checked header. */
    public static String name(MemorySegment body) {
        int length = nameLength(body);
        byte[] bytes = new byte[length];
        MemorySegment.copy(body, ValueLayout.JAVA_BYTE, HEADER, bytes, 0, length);
        return new String(bytes, StandardCharsets.UTF_8);
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

    /** Encodes a sparse table's configuration. */
    public static void writeCreate(MemorySegment body, byte[] name, TableConfig table) {
        int at = writeHeader(body, SPARSE, name, table.dimension(), (int) table.maxRows(), table.shards());
        writeOptimizer(body, at, table.optimizer());
        writeInitializer(body, at, table.initializer());
        TableExtension.write(body, at + CREATE_BODY, table);
        if (body.byteSize() >= at + CREATE_BODY + CREATE_EXTENSION + EVICTION_EXTENSION) {
            TableExtension.writeEviction(body, at + CREATE_BODY + CREATE_EXTENSION, table.eviction());
        } else if (table.eviction().enabled()) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "table '" + table.name()
                    + "': a CREATE_TABLE body without its eviction extension cannot carry eviction settings");
        }
    }

    /** Encodes a dense tensor's configuration. */
    public static void writeCreate(MemorySegment body, byte[] name, DenseConfig tensor) {
        int at = writeHeader(body, DENSE, name, tensor.length(), 1, 0);
        writeOptimizer(body, at, tensor.optimizer());
        writeInitializer(body, at, tensor.initializer());
        if (body.byteSize() > at + CREATE_BODY) {
            body.asSlice(at + CREATE_BODY).fill((byte) 0);
        }
    }

    /** Decodes a sparse table's configuration (the values are checked by {@link TableConfig}). */
    public static TableConfig readTable(MemorySegment body) {
        int at = createPayload(body);
        TableConfig table = new TableConfig(name(body), dimension(body), readOptimizer(body, at),
                readInitializer(body, at), count(body), offset(body));
        if (body.byteSize() == at + CREATE_BODY) {
            return table;
        }
        table = TableExtension.read(body, at + CREATE_BODY, table);
        if (body.byteSize() == at + CREATE_BODY + CREATE_EXTENSION) {
            return table;
        }
        return table.withEviction(TableExtension.readEviction(body, at + CREATE_BODY + CREATE_EXTENSION));
    }

    /** Decodes a dense tensor's configuration. */
    public static DenseConfig readDense(MemorySegment body) {
        int at = createPayload(body);
        return new DenseConfig(name(body), dimension(body), readOptimizer(body, at), readInitializer(body, at));
    }

    private static int createPayload(MemorySegment body) {
        int at = payloadOffset(nameLength(body));
        long size = body.byteSize();
        if (size != at + CREATE_BODY && size != at + CREATE_BODY + CREATE_EXTENSION
                && size != at + CREATE_BODY + CREATE_EXTENSION + EVICTION_EXTENSION) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "a CREATE_TABLE request with a "
                    + nameLength(body) + "-byte name has " + (at + CREATE_BODY + CREATE_EXTENSION + EVICTION_EXTENSION)
                    + " bytes (or " + (at + CREATE_BODY) + " or " + (at + CREATE_BODY + CREATE_EXTENSION)
                    + " from older clients), not " + size);
        }
        return at;
    }

    private static void writeOptimizer(MemorySegment body, int at, Optimizer optimizer) {
        double[] p = new double[4];
        int kind = switch (optimizer) {
            case Optimizer.Sgd s -> {
                p[0] = s.learningRate();
                yield OPT_SGD;
            }
            case Optimizer.Adagrad a -> {
                p[0] = a.learningRate();
                p[1] = a.initialAccumulator();
                p[2] = a.epsilon();
                yield OPT_ADAGRAD;
            }
            case Optimizer.Adam a -> {
                p[0] = a.learningRate();
                p[1] = a.beta1();
                p[2] = a.beta2();
                p[3] = a.epsilon();
                yield OPT_ADAM;
            }
            case Optimizer.Ftrl f -> {
                p[0] = f.alpha();
                p[1] = f.beta();
                p[2] = f.l1();
                p[3] = f.l2();
                yield OPT_FTRL;
            }
        };
        body.set(INT, at, kind);
        for (int i = 0; i < 4; i++) {
            body.set(DOUBLE, at + 8 + 8L * i, p[i]);
        }
    }

    private static Optimizer readOptimizer(MemorySegment body, long at) {
        int kind = body.get(INT, at);
        double a = body.get(DOUBLE, at + 8);
        double b = body.get(DOUBLE, at + 16);
        double c = body.get(DOUBLE, at + 24);
        double d = body.get(DOUBLE, at + 32);
        return switch (kind) {
            case OPT_SGD -> new Optimizer.Sgd(a);
            case OPT_ADAGRAD -> new Optimizer.Adagrad(a, b, c);
            case OPT_ADAM -> new Optimizer.Adam(a, b, c, d);
            case OPT_FTRL -> new Optimizer.Ftrl(a, b, c, d);
            default -> throw new PsException(PsException.Code.INVALID_ARGUMENT, "unknown optimizer kind " + kind);
        };
    }

    private static void writeInitializer(MemorySegment body, int at, Initializer initializer) {
        int kind;
        double a = 0;
        double b = 0;
        long seed = 0;
        switch (initializer) {
            case Initializer.Zeros z -> kind = INIT_ZEROS;
            case Initializer.Uniform u -> {
                kind = INIT_UNIFORM;
                a = u.low();
                b = u.high();
                seed = u.seed();
            }
            case Initializer.Normal n -> {
                kind = INIT_NORMAL;
                a = n.mean();
                b = n.stddev();
                seed = n.seed();
            }
        }
        body.set(INT, at + 4, kind);
        body.set(DOUBLE, at + 40, a);
        body.set(DOUBLE, at + 48, b);
        body.set(LONG, at + 56, seed);
    }

    private static Initializer readInitializer(MemorySegment body, long at) {
        int kind = body.get(INT, at + 4);
        double a = body.get(DOUBLE, at + 40);
        double b = body.get(DOUBLE, at + 48);
        long seed = body.get(LONG, at + 56);
        return switch (kind) {
            case INIT_ZEROS -> Initializer.zeros();
            case INIT_UNIFORM -> Initializer.uniform(a, b, seed);
            case INIT_NORMAL -> Initializer.normal(a, b, seed);
            default -> throw new PsException(PsException.Code.INVALID_ARGUMENT, "unknown initializer kind " + kind);
        };
    }

    // ------------------------------------------------------------------------------------------
    // DESCRIBE

    /** Bytes of one table's entry in a {@code DESCRIBE} response. */
    public static int tableInfoBytes(int nameLength) {
        return payloadOffset(nameLength) + TABLE_INFO;
    }

    /** Writes the server info; returns the offset after it. */
    static int writeServerInfo(MemorySegment out, ServerInfo info, int slotHash) {
        out.set(INT, 0, info.index());
        out.set(INT, 4, info.serverCount());
        out.set(INT, 8, info.readOnly() ? 1 : 0);
        out.set(INT, 12, info.tables().size());
        out.set(INT, 16, slotHash);
        out.set(INT, 20, 0);
        return SERVER_INFO;
    }

    /** Writes one table's entry at {@code at}; returns the offset after it. */
    static int writeTableInfo(MemorySegment out, int at, byte kind, TableStats stats) {
        return writeTableInfo(out, at, kind, stats, PullFormat.F32);
    }

    /** Writes one table's entry, with its default pull format, at {@code at}; returns the offset after it. */
    static int writeTableInfo(MemorySegment out, int at, byte kind, TableStats stats, PullFormat format) {
        byte[] name = stats.name().getBytes(StandardCharsets.UTF_8);
        int p = at + writeHeader(out.asSlice(at), kind, name, stats.dimension(), 0, 0);
        out.set(LONG, p, stats.rows());
        out.set(LONG, p + 8, stats.capacityRows());
        out.set(LONG, p + 16, stats.bytesPerRow());
        out.set(LONG, p + 24, stats.reservedBytes());
        writeOptimizer(out, p + 32, stats.optimizer());
        out.set(INT, p + 36, format.code());
        return p + TABLE_INFO;
    }

    /**
     * Decodes a {@code DESCRIBE} response.
     *
     * @throws PsException {@code LENGTH_MISMATCH} if its size disagrees with what it holds,
     *                     {@code INVALID_ARGUMENT} if a table's optimizer is unknown or invalid
     */
    static ServerInfo readDescribe(MemorySegment in, String address) {
        if (in.byteSize() < SERVER_INFO) {
            throw malformedDescribe(address, in.byteSize() + " bytes, shorter than the server info");
        }
        int index = in.get(INT, 0);
        int count = in.get(INT, 4);
        boolean readOnly = (in.get(INT, 8) & 1) != 0;
        int tables = in.get(INT, 12);
        int slotHash = in.get(INT, 16);
        // Every entry takes at least tableInfoBytes(0): the count cannot claim more than the bytes hold.
        if (tables < 0 || tables > (in.byteSize() - SERVER_INFO) / tableInfoBytes(0)) {
            throw malformedDescribe(address, tables + " tables in " + in.byteSize() + " bytes");
        }
        java.util.List<ServerInfo.Table> list = new java.util.ArrayList<>(tables);
        long at = SERVER_INFO;
        for (int t = 0; t < tables; t++) {
            if (in.byteSize() - at < HEADER) {
                throw malformedDescribe(address, "table " + t + " at byte " + at + " is cut short");
            }
            MemorySegment entry = in.asSlice(at);
            int p = payloadOffset(nameLength(entry));
            if (entry.byteSize() < p + TABLE_INFO) {
                throw malformedDescribe(address, "table " + t + " at byte " + at + " is cut short");
            }
            Optimizer optimizer = readOptimizer(entry, p + 32);
            TableStats stats = new TableStats(name(entry), dimension(entry), optimizer, entry.get(LONG, p),
                    entry.get(LONG, p + 8), entry.get(LONG, p + 16), entry.get(LONG, p + 24));
            list.add(new ServerInfo.Table(kind(entry) == DENSE, stats, PullFormat.ofCode(entry.get(INT, p + 36))));
            at += p + TABLE_INFO;
        }
        if (at != in.byteSize()) {
            throw malformedDescribe(address, (in.byteSize() - at) + " bytes after the last table");
        }
        return new ServerInfo(address, index, count, readOnly, slotHash, list);
    }

    private static PsException malformedDescribe(String address, String problem) {
        return new PsException(PsException.Code.LENGTH_MISMATCH, "server " + address
                + " sent a malformed DESCRIBE response: " + problem);
    }

    // ------------------------------------------------------------------------------------------
    // SLOT_TABLE

    /** Bytes of a {@code SLOT_TABLE} response. */
    public static int slotTableBytes() {
        return Integer.BYTES + Slots.COUNT * Short.BYTES;
    }

    static void writeSlotTable(MemorySegment out, SlotTable slots) {
        out.set(INT, 0, slots.serverCount());
        for (int s = 0; s < Slots.COUNT; s++) {
            out.set(SHORT, Integer.BYTES + (long) s * Short.BYTES, (short) slots.serverOfSlot(s));
        }
    }

    static SlotTable readSlotTable(MemorySegment in) {
        if (in.byteSize() != slotTableBytes()) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "a slot table of " + in.byteSize()
                    + " bytes; expected " + slotTableBytes());
        }
        int[] map = new int[Slots.COUNT];
        for (int s = 0; s < Slots.COUNT; s++) {
            map[s] = Short.toUnsignedInt(in.get(SHORT, Integer.BYTES + (long) s * Short.BYTES));
        }
        return SlotTable.of(map, in.get(INT, 0));
    }

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
