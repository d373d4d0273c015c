package dev.ferry.ps.net;

import static dev.ferry.ps.net.PsDescriptor.CREATE_BODY;
import static dev.ferry.ps.net.PsDescriptor.CREATE_EXTENSION;
import static dev.ferry.ps.net.PsDescriptor.DENSE;
import static dev.ferry.ps.net.PsDescriptor.DOUBLE;
import static dev.ferry.ps.net.PsDescriptor.EVICTION_EXTENSION;
import static dev.ferry.ps.net.PsDescriptor.INT;
import static dev.ferry.ps.net.PsDescriptor.LONG;
import static dev.ferry.ps.net.PsDescriptor.SPARSE;
import static dev.ferry.ps.net.PsDescriptor.count;
import static dev.ferry.ps.net.PsDescriptor.dimension;
import static dev.ferry.ps.net.PsDescriptor.name;
import static dev.ferry.ps.net.PsDescriptor.nameLength;
import static dev.ferry.ps.net.PsDescriptor.offset;
import static dev.ferry.ps.net.PsDescriptor.payloadOffset;
import static dev.ferry.ps.net.PsDescriptor.writeHeader;

import java.lang.foreign.MemorySegment;

import dev.ferry.ps.Admission;
import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.PullFormat;
import dev.ferry.ps.TableConfig;

/**
 * The body of {@code CREATE_TABLE}: a table's or tensor's configuration after the common header
 * of {@link PsDescriptor} (kind, name, dimension or length, max rows, shards). Reached through
 * {@link PsDescriptor#writeCreate(MemorySegment, byte[], TableConfig)} and
 * {@link PsDescriptor#readTable}; the optimizer's encoding is also that of a {@code DESCRIBE}
 * table entry ({@link DescribeDescriptor}).
 *
 * <p>The body after the name, {@value PsDescriptor#CREATE_BODY} bytes:
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
 * The last {@value PsDescriptor#CREATE_EXTENSION} + {@value PsDescriptor#EVICTION_EXTENSION} bytes
 * (a sparse table's default {@link PullFormat} code and its {@link Admission}: kind 0 always, 1
 * after a count (the parameter: count + cells x 2^8), 2 with a probability; then its eviction,
 * policy 0 least recently updated, 1 least frequently used) may be absent, from older clients: a
 * 64-byte body stands for f32 and admit-always, and a body without the last 32 bytes for no
 * eviction ({@link TableExtension}).
 */
final class CreateTableDescriptor {

    private static final int OPT_SGD = 1;
    private static final int OPT_ADAGRAD = 2;
    private static final int OPT_ADAM = 3;
    private static final int OPT_FTRL = 4;
    private static final int INIT_ZEROS = 1;
    private static final int INIT_UNIFORM = 2;
    private static final int INIT_NORMAL = 3;

    private CreateTableDescriptor() {
    }

    /** Encodes a sparse table's configuration. */
    static void writeCreate(MemorySegment body, byte[] name, TableConfig table) {
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
    static void writeCreate(MemorySegment body, byte[] name, DenseConfig tensor) {
        int at = writeHeader(body, DENSE, name, tensor.length(), 1, 0);
        writeOptimizer(body, at, tensor.optimizer());
        writeInitializer(body, at, tensor.initializer());
        if (body.byteSize() > at + CREATE_BODY) {
            body.asSlice(at + CREATE_BODY).fill((byte) 0);
        }
    }

    /** Decodes a sparse table's configuration (the values are checked by {@link TableConfig}). */
    static TableConfig readTable(MemorySegment body) {
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
    static DenseConfig readDense(MemorySegment body) {
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

    static void writeOptimizer(MemorySegment body, int at, Optimizer optimizer) {
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

    static Optimizer readOptimizer(MemorySegment body, long at) {
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
}
