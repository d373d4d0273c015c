package dev.ferry.fabric;

/**
 * An error completion read with {@link CompletionQueue#readError}: which operation failed and why.
 *
 * @param context the context passed with the failed operation
 * @param flags the operation's flags ({@code Fi.SEND}, {@code Fi.RECV}, {@code Fi.READ}, ...)
 * @param errno the positive errno ({@code ECANCELED} for a flushed receive, {@code EIO}, ...)
 * @param providerErrno the provider's own error code
 * @param message libfabric's and the provider's description
 */
public record CompletionError(long context, long flags, int errno, int providerErrno, String message) {

    /** The errno's name. */
    public String errnoName() {
        return Errno.name(errno);
    }

    /** This error as an exception. */
    public FabricException toException(String operation) {
        return FabricException.of(errno, operation + " (" + message + ")");
    }
}
