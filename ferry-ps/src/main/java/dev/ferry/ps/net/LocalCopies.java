package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.List;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.DenseTensor;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableConfig;

/**
 * A serving server's local copies of training's tables and tensors, made on first sight from
 * the configs the export sends ({@link DeltaFollower}, {@link CheckpointCatchUp}); a copy of
 * another layout is refused.
 */
final class LocalCopies {

    private LocalCopies() {
    }

    /** The local copy of a training table, made on first sight; one of another layout is refused. */
    static SparseTable table(ParameterServer ps, TableConfig config, String source) {
        try {
            SparseTable table = ps.table(config.name());
            if (table.dimension() != config.dimension()
                    || table.config().optimizer().stateSlots() != config.optimizer().stateSlots()) {
                throw new PsException(PsException.Code.WRONG_DIMENSION, "table '" + config.name()
                        + "' here has dimension " + table.dimension() + " and " + table.config().optimizer()
                        + "; training server " + source + " has " + config.dimension() + " and " + config.optimizer());
            }
            return table;
        } catch (PsException e) {
            if (e.code() != PsException.Code.UNKNOWN_TABLE) {
                throw e;
            }
        }
        try {
            return ps.createTable(config);
        } catch (PsException e) {
            if (e.code() == PsException.Code.TABLE_EXISTS) {
                return ps.table(config.name());
            }
            throw e;
        }
    }

    /** The local copy of a training tensor, made on first sight; one of another length is refused. */
    static DenseTensor dense(ParameterServer ps, DenseConfig config, String source) {
        try {
            DenseTensor tensor = ps.dense(config.name());
            if (tensor.config().length() != config.length()
                    || tensor.config().optimizer().stateSlots() != config.optimizer().stateSlots()) {
                throw new PsException(PsException.Code.WRONG_DIMENSION, "tensor '" + config.name() + "' here has "
                        + tensor.config().length() + " weights and " + tensor.config().optimizer() + "; training server "
                        + source + " has " + config.length() + " and " + config.optimizer());
            }
            return tensor;
        } catch (PsException e) {
            if (e.code() != PsException.Code.UNKNOWN_TABLE) {
                throw e;
            }
        }
        try {
            return ps.createDense(config);
        } catch (PsException e) {
            if (e.code() == PsException.Code.TABLE_EXISTS) {
                return ps.dense(config.name());
            }
            throw e;
        }
    }

    /** Reads the tables of an {@code EXPORT_TABLES} answer, checking every length. */
    static void readTables(MemorySegment in, List<TableConfig> out) {
        if (in.byteSize() < ExportDescriptor.TABLES_HEADER) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "an EXPORT_TABLES answer of " + in.byteSize()
                    + " bytes");
        }
        int n = in.get(PsDescriptor.INT, 16);
        long at = ExportDescriptor.TABLES_HEADER;
        for (int i = 0; i < n; i++) {
            if (at + 8 > in.byteSize()) {
                throw new PsException(PsException.Code.LENGTH_MISMATCH, "the EXPORT_TABLES answer ends before table "
                        + i + " of " + n);
            }
            int length = in.get(PsDescriptor.INT, at);
            if (length < PsDescriptor.HEADER || at + 8 + length > in.byteSize()) {
                throw new PsException(PsException.Code.LENGTH_MISMATCH, "table " + i + " of " + length
                        + " bytes does not fit the EXPORT_TABLES answer");
            }
            MemorySegment create = in.asSlice(at + 8, length);
            PsDescriptor.checkHeader(create);
            out.add(PsDescriptor.readTable(create));
            at += 8 + ((length + 7) & ~7L);
        }
    }
}
