package dev.ferry.ps;

import java.io.Serial;
import java.util.Objects;

/**
 * A parameter-server request or operation failed. The {@link Code} says why in a form the RPC
 * layer can put on the wire; the message says it for a person (table, ids, sizes, files).
 *
 * <p>Every error caused by a bad request ({@link Code#isBadRequest()}) is raised before the
 * request touches any state: the tables are exactly as they were.
 */
public class PsException extends RuntimeException {

    @Serial
    private static final long serialVersionUID = 1L;

    /** Why a request or operation failed. */
    public enum Code {
        /** No table or dense tensor of that name. */
        UNKNOWN_TABLE(true),
        /** A table or dense tensor of that name exists already. */
        TABLE_EXISTS(true),
        /** An argument is out of range: a configuration value, an offset, a non-finite gradient. */
        INVALID_ARGUMENT(true),
        /** The request's dimension is not the table's. */
        WRONG_DIMENSION(true),
        /** The ids and the gradients (or the output buffer) disagree in length. */
        LENGTH_MISMATCH(true),
        /** The request carries more ids or bytes than {@link PsConfig} allows. */
        REQUEST_TOO_LARGE(true),
        /** The table holds {@link TableConfig#maxRows()} rows and a new one was needed. */
        TABLE_FULL(false),
        /** The server is in read-only serving mode. */
        READ_ONLY(true),
        /** A checkpoint is truncated, corrupt or inconsistent; it was not loaded. */
        CHECKPOINT_CORRUPT(false),
        /** Reading or writing a checkpoint failed with an I/O error. */
        CHECKPOINT_IO(false),
        /** A checkpoint was required and the directory holds none that is complete. */
        NO_CHECKPOINT(false),
        /**
         * An id's virtual slot (or a dense tensor) belongs to another server: the client routed
         * with a slot table that is not this cluster's.
         */
        WRONG_SERVER(true),
        /** The server or table is closed. */
        CLOSED(false),
        /**
         * A replicated slot group has fewer in-sync copies than a push needs (the cluster's
         * minimum in-sync setting): durability first, the push is refused until a copy is rebuilt.
         */
        NOT_ENOUGH_REPLICAS(false),
        /**
         * The server refused a push without applying any of it: the pushes ahead of it on the
         * same slot groups (forwarded to a slot move's target, or replicated to a backup) held
         * them for the whole deadline. Sent again with its dedupe id, it is applied once; the
         * client does so within its retry budget.
         */
        BUSY(false),
        /**
         * The server applied the push, but a copy it owes (its rows forwarded to a slot move's
         * target) did not finish within the deadline: as after a timeout, the push may or may
         * not count. Sent again with its dedupe id it counts once where the servers record those
         * ids (a controller's cluster), and the client does so there.
         */
        UNCONFIRMED(false);

        private final boolean badRequest;

        Code(boolean badRequest) {
            this.badRequest = badRequest;
        }

        /** Whether the request itself was wrong (retrying it unchanged cannot succeed). */
        public boolean isBadRequest() {
            return badRequest;
        }
    }

    private final Code code;

    /** An error with a code and a message for people. */
    public PsException(Code code, String message) {
        super(message);
        this.code = Objects.requireNonNull(code, "code");
    }

    /** An error with a code, a message and the failure beneath it. */
    public PsException(Code code, String message, Throwable cause) {
        super(message, cause);
        this.code = Objects.requireNonNull(code, "code");
    }

    /** Why it failed. */
    public Code code() {
        return code;
    }

    @Override
    public String toString() {
        return "PsException[" + code + "]: " + getMessage();
    }
}
