package dev.ferry.fabric;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * What the tcp provider's connection manager does not do by itself, seen from outside it.
 *
 * <p>libfabric 1.17's tcp provider (prov/tcp/src/tcpx_conn_mgr.c) runs its connection manager
 * only inside {@code fi_eq_read}, and each run accepts <em>one</em> connection from the passive
 * endpoint's listening socket ({@code tcpx_accept}), however many wait in its backlog (4096).
 * An accepted socket then waits in the manager's poll set for the peer's connection request.
 * Two consequences for a listener under a flood of connections that never complete libfabric's
 * handshake:
 * <ul>
 *   <li>Connections queue in the backlog at one per event-queue read. {@link #backlogged()}
 *       polls the listening socket itself, so that the owner can read the queue until the
 *       backlog is empty.</li>
 *   <li>A peer that closes before sending its request makes {@code rx_cm_data}'s {@code recv}
 *       return 0, and the manager takes the error from {@code errno}: {@code ofi_sockerr() ?
 *       -ofi_sockerr() : -FI_EIO}. {@code recv} returning 0 does not set {@code errno}, so the
 *       value left by an earlier call on the thread decides; when that is {@code EAGAIN} (the
 *       usual leftover of a poller that reads empty sockets) the manager "retries later" and
 *       keeps the socket, in CLOSE-WAIT, for good. {@link #clearErrno()} before each read makes
 *       it {@code EIO}, and the manager closes the socket.</li>
 * </ul>
 *
 * <p>The listening socket is found by its port: its inode in {@code /proc/net/tcp[6]} (state
 * LISTEN), then the descriptor of this process that links to that inode.
 */
final class ListenerSocket {

    private static final MethodHandle ERRNO_LOCATION = LibFabric.LINKER.downcallHandle(
            LibFabric.LINKER.defaultLookup().find("__errno_location").orElseThrow(), FunctionDescriptor.of(JAVA_LONG));
    private static final MethodHandle POLL = LibFabric.LINKER.downcallHandle(
            LibFabric.LINKER.defaultLookup().find("poll").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_INT));
    private static final short POLLIN = 1;
    private static final String LISTEN = "0A";

    private final int fd;
    /** One {@code struct pollfd}, reused by every poll (the owner's thread only). */
    private final MemorySegment pollfd;

    private ListenerSocket(int fd) {
        this.fd = fd;
        this.pollfd = Arena.ofAuto().allocate(8, 4);
        pollfd.set(JAVA_INT, 0, fd);
    }

    /** The listening socket bound to the port in {@code sockaddr}, or null if it cannot be found. */
    static ListenerSocket of(byte[] sockaddr) {
        if (sockaddr.length < 4) {
            return null;
        }
        int port = ((sockaddr[2] & 0xff) << 8) | (sockaddr[3] & 0xff);
        try {
            // Another process may listen on the same port at another address: take ours.
            for (long inode : listeningInodes(port)) {
                int fd = descriptorOf(inode);
                if (fd >= 0) {
                    return new ListenerSocket(fd);
                }
            }
            return null;
        } catch (IOException | UncheckedIOException | SecurityException e) {
            return null;
        }
    }

    /** Sets this thread's {@code errno} to 0; see the class description for why. */
    static void clearErrno() {
        try {
            long location = (long) ERRNO_LOCATION.invokeExact();
            LibFabric.MEMORY.set(JAVA_INT, location, 0);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** Whether connections wait in the backlog for the provider to accept them. */
    boolean backlogged() {
        pollfd.set(JAVA_SHORT, 4, POLLIN);
        pollfd.set(JAVA_SHORT, 6, (short) 0);
        try {
            int n = (int) POLL.invokeExact(pollfd.address(), 1L, 0);
            return n > 0 && (pollfd.get(JAVA_SHORT, 6) & POLLIN) != 0;
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** The descriptor, for tests. */
    int fd() {
        return fd;
    }

    private static List<Long> listeningInodes(int port) throws IOException {
        List<Long> inodes = new java.util.ArrayList<>();
        for (String table : new String[] {"/proc/net/tcp", "/proc/net/tcp6"}) {
            Path path = Path.of(table);
            if (!Files.isReadable(path)) {
                continue;
            }
            List<String> lines = Files.readAllLines(path);
            for (int i = 1; i < lines.size(); i++) {
                String[] f = lines.get(i).trim().split("\\s+");
                if (f.length < 10 || !f[3].equals(LISTEN)) {
                    continue;
                }
                String local = f[1];
                int colon = local.lastIndexOf(':');
                if (colon > 0 && Integer.parseInt(local.substring(colon + 1), 16) == port) {
                    inodes.add(Long.parseLong(f[9]));
                }
            }
        }
        return inodes;
    }

    private static int descriptorOf(long inode) throws IOException {
        String target = "socket:[" + inode + "]";
        try (DirectoryStream<Path> fds = Files.newDirectoryStream(Path.of("/proc/self/fd"))) {
            for (Path fd : fds) {
                try {
                    if (Files.readSymbolicLink(fd).toString().equals(target)) {
                        return Integer.parseInt(fd.getFileName().toString());
                    }
                } catch (IOException | NumberFormatException e) {
                    // closed meanwhile, or the directory's own descriptor
                }
            }
        }
        return -1;
    }
}
