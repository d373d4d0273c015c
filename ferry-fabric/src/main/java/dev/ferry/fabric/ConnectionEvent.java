package dev.ferry.fabric;

/**
 * An event from an {@link EventQueue}. A {@link Type#CONNREQ} carries the {@link FabricInfo}
 * to open the accepting endpoint from; close the event afterwards to free it.
 */
public final class ConnectionEvent implements AutoCloseable {

    /** Event kinds. */
    public enum Type {
        /** A peer asks to connect to a passive endpoint. */
        CONNREQ,
        /** A connection is established. */
        CONNECTED,
        /** The peer shut the connection down. */
        SHUTDOWN,
        /** An asynchronous error: a refused or failed connection, see {@link #errno()}. */
        ERROR,
        /** Another event libfabric reported. */
        OTHER
    }

    private final Type type;
    private final long fid;
    private final FabricInfo info;
    private final int errno;
    private final String message;
    private final byte[] data;
    private boolean closed;

    ConnectionEvent(Type type, long fid, long info, int errno, String message) {
        this(type, fid, info, errno, message, new byte[0]);
    }

    ConnectionEvent(Type type, long fid, long info, int errno, String message, byte[] data) {
        this.data = data;
        this.type = type;
        this.fid = fid;
        this.info = info == 0 ? null : new FabricInfo(info);
        this.errno = errno;
        this.message = message;
        if (info != 0) {
            FabricObject.OPENED.increment();
        }
    }

    /** The kind of event. */
    public Type type() {
        return type;
    }

    /** Whether the event concerns {@code object} (an endpoint or passive endpoint). */
    public boolean concerns(FabricObject object) {
        return object != null && object.fid == fid;
    }

    /** The connection request's info, for {@link Domain#openEndpoint}; null for other events. */
    public FabricInfo info() {
        return info;
    }

    /** The connection data the peer passed to {@link Endpoint#connect(byte[], byte[])}. */
    public byte[] data() {
        return data.clone();
    }

    /** The positive errno of an {@link Type#ERROR} event. */
    public int errno() {
        return errno;
    }

    /** A description of an error event. */
    public String message() {
        return message;
    }

    /** Frees the connection request's info, if any. */
    @Override
    public void close() {
        if (info != null && !closed) {
            closed = true;
            InfoList.free(info.address);
            FabricObject.CLOSED.increment();
        }
    }

    @Override
    public String toString() {
        return type == Type.ERROR ? "ERROR " + Errno.name(errno) + ": " + message : type.toString();
    }
}
