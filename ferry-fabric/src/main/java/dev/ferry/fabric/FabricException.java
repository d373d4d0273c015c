package dev.ferry.fabric;

/**
 * A libfabric call failed. Carries the positive errno, its name ({@code ECONNREFUSED},
 * {@code FI_EAVAIL}, ...) and libfabric's own text for it.
 */
public class FabricException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final int errno;

    /** A failure with no errno. */
    public FabricException(String message, Throwable cause) {
        super(message, cause);
        this.errno = 0;
    }

    /** A failure with no errno. */
    public FabricException(String message) {
        this(message, null);
    }

    private FabricException(int errno, String message) {
        super(message);
        this.errno = errno;
    }

    static FabricException of(int errno, String operation) {
        return new FabricException(errno, operation + " failed: " + Errno.name(errno) + " (" + errno + "): "
                + LibFabric.strerror(errno));
    }

    /** The positive errno, 0 if none. */
    public int errno() {
        return errno;
    }

    /** The errno's symbolic name, such as {@code ECONNREFUSED}. */
    public String errnoName() {
        return Errno.name(errno);
    }
}
