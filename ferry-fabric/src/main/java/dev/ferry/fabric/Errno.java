package dev.ferry.fabric;

/** Names for the errno values libfabric returns: Linux's below 256, libfabric's own from 256. */
public final class Errno {

    /** Interrupted: a blocking wait cut short by a signal to the thread. */
    public static final int EINTR = 4;
    /** Try again: an empty queue on a read, "progress, then retry" on a post. */
    public static final int EAGAIN = 11;
    /** No data: no provider matches the hints. */
    public static final int ENODATA = 61;
    /** Timed out: a blocking wait that saw nothing in its time. */
    public static final int ETIMEDOUT = 110;
    /** The operation was canceled, e.g. receives flushed when the peer closed. */
    public static final int ECANCELED = 125;
    /** The peer refused the connection. */
    public static final int ECONNREFUSED = 111;
    /** The provider does not implement the call. */
    public static final int ENOSYS = 38;
    /** The peer reset the connection. */
    public static final int ECONNRESET = 104;
    /** An I/O error: e.g. a failed remote access. */
    public static final int EIO = 5;
    /** An error entry waits in the queue. */
    public static final int FI_EAVAIL = 259;
    /** A message was larger than the posted buffer. */
    public static final int FI_ETRUNC = 265;

    private Errno() {
    }

    /** The symbolic name of {@code errno}, or {@code errno <n>}. */
    public static String name(int errno) {
        return switch (errno) {
            case 0 -> "OK";
            case 1 -> "EPERM";
            case 2 -> "ENOENT";
            case 4 -> "EINTR";
            case EIO -> "EIO";
            case 7 -> "E2BIG";
            case 9 -> "EBADF";
            case EAGAIN -> "EAGAIN";
            case 12 -> "ENOMEM";
            case 13 -> "EACCES";
            case 14 -> "EFAULT";
            case 16 -> "EBUSY";
            case 17 -> "EEXIST";
            case 19 -> "ENODEV";
            case 22 -> "EINVAL";
            case 24 -> "EMFILE";
            case 28 -> "ENOSPC";
            case ENOSYS -> "ENOSYS";
            case ENODATA -> "ENODATA";
            case 71 -> "EPROTO";
            case 90 -> "EMSGSIZE";
            case 95 -> "EOPNOTSUPP";
            case 98 -> "EADDRINUSE";
            case 99 -> "EADDRNOTAVAIL";
            case 101 -> "ENETUNREACH";
            case 103 -> "ECONNABORTED";
            case ECONNRESET -> "ECONNRESET";
            case 105 -> "ENOBUFS";
            case 106 -> "EISCONN";
            case 107 -> "ENOTCONN";
            case 108 -> "ESHUTDOWN";
            case 110 -> "ETIMEDOUT";
            case ECONNREFUSED -> "ECONNREFUSED";
            case 113 -> "EHOSTUNREACH";
            case 114 -> "EALREADY";
            case 115 -> "EINPROGRESS";
            case ECANCELED -> "ECANCELED";
            case 126 -> "ENOKEY";
            case 256 -> "FI_EOTHER";
            case 257 -> "FI_ETOOSMALL";
            case 258 -> "FI_EOPBADSTATE";
            case FI_EAVAIL -> "FI_EAVAIL";
            case 260 -> "FI_EBADFLAGS";
            case 261 -> "FI_ENOEQ";
            case 262 -> "FI_EDOMAIN";
            case 263 -> "FI_ENOCQ";
            case 264 -> "FI_ECRC";
            case FI_ETRUNC -> "FI_ETRUNC";
            case 266 -> "FI_ENOKEY";
            case 267 -> "FI_ENOAV";
            case 268 -> "FI_EOVERRUN";
            case 269 -> "FI_ENORX";
            default -> "errno " + errno;
        };
    }
}
