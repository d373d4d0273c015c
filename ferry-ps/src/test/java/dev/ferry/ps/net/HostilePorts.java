package dev.ferry.ps.net;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * What an attacker on the host sees of a server process and does to it: its listening ports
 * (as {@code ss -ltnp} shows them), its open files, raw connections that send chosen bytes and
 * collect every byte the server answers, and a relay that records what a good client sends,
 * to replay it later.
 */
final class HostilePorts {

    private static final String LISTEN = "0A";

    private HostilePorts() {
    }

    /** Every TCP port process {@code pid} listens on. */
    static List<Integer> listening(long pid) throws IOException {
        Set<Long> inodes = socketInodes(pid);
        List<Integer> ports = new ArrayList<>();
        for (String table : new String[] {"/proc/net/tcp", "/proc/net/tcp6"}) {
            Path path = Path.of(table);
            if (!Files.isReadable(path)) {
                continue;
            }
            List<String> lines = Files.readAllLines(path);
            for (int i = 1; i < lines.size(); i++) {
                String[] f = lines.get(i).trim().split("\\s+");
                if (f.length > 9 && f[3].equals(LISTEN) && inodes.contains(Long.parseLong(f[9]))) {
                    String local = f[1];
                    int port = Integer.parseInt(local.substring(local.lastIndexOf(':') + 1), 16);
                    if (!ports.contains(port)) {
                        ports.add(port);
                    }
                }
            }
        }
        return ports;
    }

    /** The number of files process {@code pid} holds open. */
    static long openFiles(long pid) {
        try (DirectoryStream<Path> fds = Files.newDirectoryStream(Path.of("/proc/" + pid + "/fd"))) {
            long n = 0;
            for (Path ignored : fds) {
                n++;
            }
            return n;
        } catch (IOException e) {
            throw new IllegalStateException("cannot count the open files of " + pid, e);
        }
    }

    private static Set<Long> socketInodes(long pid) throws IOException {
        Set<Long> inodes = new HashSet<>();
        try (DirectoryStream<Path> fds = Files.newDirectoryStream(Path.of("/proc/" + pid + "/fd"))) {
            for (Path fd : fds) {
                try {
                    String target = Files.readSymbolicLink(fd).toString();
                    if (target.startsWith("socket:[")) {
                        inodes.add(Long.parseLong(target.substring(8, target.length() - 1)));
                    }
                } catch (IOException e) {
                    // closed meanwhile
                }
            }
        }
        return inodes;
    }

    /**
     * Connects to {@code port}, sends {@code bytes} (then half-closes if {@code shut}), and
     * returns every byte the server sent until it closed or {@code quietMillis} passed without a
     * byte.
     */
    static byte[] exchange(String host, int port, byte[] bytes, boolean shut, int quietMillis) throws IOException {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(host, port), 5_000);
            s.setSoTimeout(quietMillis);
            ByteArrayOutputStream answer = new ByteArrayOutputStream();
            try {
                s.getOutputStream().write(bytes);
                s.getOutputStream().flush();
                if (shut) {
                    s.shutdownOutput();
                }
            } catch (SocketException e) {
                return answer.toByteArray(); // closed on us while we wrote: nothing more to read
            }
            InputStream in = s.getInputStream();
            byte[] buffer = new byte[4096];
            try {
                int n;
                while ((n = in.read(buffer)) >= 0) {
                    answer.write(buffer, 0, n);
                }
            } catch (SocketTimeoutException | SocketException e) {
                // quiet long enough, or reset: what came is what we judge
            }
            return answer.toByteArray();
        }
    }

    /** A relay in front of {@code host:port} that records what its clients send, per connection. */
    static final class Recorder implements AutoCloseable {

        private final ServerSocket socket;
        private final String host;
        private final int port;
        private final List<ByteArrayOutputStream> sessions = new CopyOnWriteArrayList<>();
        private final List<Socket> open = new CopyOnWriteArrayList<>();
        private final Thread acceptor;

        Recorder(String host, int port) throws IOException {
            this.host = host;
            this.port = port;
            this.socket = new ServerSocket(0, 50, java.net.InetAddress.getByName(host));
            this.acceptor = Thread.ofVirtual().start(this::run);
        }

        /** host:port clients dial instead of the server's. */
        String address() {
            return host + ":" + socket.getLocalPort();
        }

        /** What each relayed connection's client sent, in order of connection. */
        List<byte[]> sessions() {
            List<byte[]> all = new ArrayList<>();
            for (ByteArrayOutputStream s : sessions) {
                synchronized (s) {
                    all.add(s.toByteArray());
                }
            }
            return all;
        }

        private void run() {
            while (!socket.isClosed()) {
                try {
                    Socket client = socket.accept();
                    Socket server = new Socket(host, port);
                    open.add(client);
                    open.add(server);
                    ByteArrayOutputStream recorded = new ByteArrayOutputStream();
                    sessions.add(recorded);
                    Thread.ofVirtual().start(() -> pump(client, server, recorded));
                    Thread.ofVirtual().start(() -> pump(server, client, null));
                } catch (IOException e) {
                    return;
                }
            }
        }

        private static void pump(Socket from, Socket to, ByteArrayOutputStream record) {
            byte[] buffer = new byte[16384];
            try {
                InputStream in = from.getInputStream();
                OutputStream out = to.getOutputStream();
                int n;
                while ((n = in.read(buffer)) >= 0) {
                    if (record != null) {
                        synchronized (record) {
                            record.write(buffer, 0, n);
                        }
                    }
                    out.write(buffer, 0, n);
                    out.flush();
                }
            } catch (IOException e) {
                // one side closed
            } finally {
                try {
                    to.shutdownOutput();
                } catch (IOException e) {
                    // closed already
                }
            }
        }

        @Override
        public void close() throws IOException {
            socket.close();
            for (Socket s : open) {
                s.close();
            }
            acceptor.interrupt();
        }
    }

    /** A connection request of libfabric 1.17's tcp provider (32-byte header) naming link {@code id}. */
    static byte[] providerConnectionRequest(int id) {
        ByteBuffer b = ByteBuffer.allocate(36);
        b.put((byte) 3).put((byte) 0).putShort((short) 4).putInt(0).putLong(0).putLong(0);
        b.order(java.nio.ByteOrder.LITTLE_ENDIAN).putLong(1).putInt(id);
        return b.array();
    }
}
