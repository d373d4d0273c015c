package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;

import dev.ferry.ps.Admission;
import dev.ferry.ps.Eviction;
import dev.ferry.ps.EvictionPolicy;
import dev.ferry.ps.PsException;
import dev.ferry.ps.PullFormat;
import dev.ferry.ps.TableConfig;

/**
 * The {@link PsDescriptor#CREATE_EXTENSION} bytes of a {@code CREATE_TABLE} body: a sparse
 * table's default {@link PullFormat} and its {@link Admission}, laid out as
 * {@link PsDescriptor} draws them.
 */
final class TableExtension {

    private static final int ALWAYS = 0;
    private static final int AFTER = 1;
    private static final int PROBABILITY = 2;

    private TableExtension() {
    }

    static void write(MemorySegment body, long at, TableConfig table) {
        body.set(PsDescriptor.INT, at, table.pullFormat().code());
        int kind;
        double parameter;
        switch (table.admission()) {
            case Admission.Always a -> {
                kind = ALWAYS;
                parameter = 0;
            }
            case Admission.After a -> {
                kind = AFTER;
                parameter = a.count() + (double) a.filterCells() * 256;
            }
            case Admission.Probability p -> {
                kind = PROBABILITY;
                parameter = p.p();
            }
        }
        body.set(PsDescriptor.INT, at + 4, kind);
        body.set(PsDescriptor.DOUBLE, at + 8, parameter);
    }

    /**
     * {@code table} with the pull format and admission of the extension at {@code at}.
     *
     * @throws PsException {@code INVALID_ARGUMENT} for an unknown format or admission, or values
     *                     out of range
     */
    static TableConfig read(MemorySegment body, long at, TableConfig table) {
        PullFormat format = PullFormat.ofCode(body.get(PsDescriptor.INT, at));
        int kind = body.get(PsDescriptor.INT, at + 4);
        double parameter = body.get(PsDescriptor.DOUBLE, at + 8);
        Admission admission = switch (kind) {
            case ALWAYS -> Admission.always();
            case AFTER -> {
                if (!(parameter >= 0 && parameter < 0x1p40) || parameter != Math.rint(parameter)) {
                    throw new PsException(PsException.Code.INVALID_ARGUMENT, "admission parameter " + parameter
                            + " is not a count and a filter size");
                }
                long packed = (long) parameter;
                yield Admission.after((int) (packed & 0xFF), (int) (packed >>> 8));
            }
            case PROBABILITY -> Admission.probability(parameter);
            default -> throw new PsException(PsException.Code.INVALID_ARGUMENT, "unknown admission kind " + kind);
        };
        return table.withPullFormat(format).withAdmission(admission);
    }

    /** Writes {@code eviction} in the {@link PsDescriptor#EVICTION_EXTENSION} bytes at {@code at}. */
    static void writeEviction(MemorySegment body, long at, Eviction eviction) {
        body.set(PsDescriptor.LONG, at, eviction.ttlNanos());
        body.set(PsDescriptor.LONG, at + 8, eviction.capacity());
        body.set(PsDescriptor.INT, at + 16, eviction.policy().ordinal());
        body.set(PsDescriptor.INT, at + 20, 0);
        body.set(PsDescriptor.DOUBLE, at + 24, eviction.margin());
    }

    /**
     * The eviction settings at {@code at}.
     *
     * @throws PsException {@code INVALID_ARGUMENT} for an unknown policy or values out of range
     */
    static Eviction readEviction(MemorySegment body, long at) {
        int policy = body.get(PsDescriptor.INT, at + 16);
        EvictionPolicy[] all = EvictionPolicy.values();
        if (policy < 0 || policy >= all.length) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "unknown eviction policy " + policy);
        }
        return new Eviction(body.get(PsDescriptor.LONG, at), body.get(PsDescriptor.LONG, at + 8), all[policy],
                body.get(PsDescriptor.DOUBLE, at + 24));
    }
}
