package dev.ferry.cluster;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;

import org.apache.zookeeper.server.embedded.ExitHandler;
import org.apache.zookeeper.server.embedded.ZooKeeperServerEmbedded;

/**
 * A standalone ZooKeeper inside this process through ZooKeeper's own embedding API, on
 * 127.0.0.1: the single-host default of {@code bin/ferry cluster start}. Its data directory keeps
 * the assignment across restarts. A host failure takes it down with every server of the host,
 * which is the same failure domain; several hosts use an external ensemble instead.
 */
public final class EmbeddedZooKeeper implements AutoCloseable {

    private final ZooKeeperServerEmbedded server;
    private final int port;

    private EmbeddedZooKeeper(ZooKeeperServerEmbedded server, int port) {
        this.server = server;
        this.port = port;
    }

    /**
     * Starts it on {@code port} (0: a free one) with its data under {@code directory}.
     *
     * @param tickMillis ZooKeeper's tick: sessions may last 2 to 20 ticks
     */
    public static EmbeddedZooKeeper start(Path directory, int port, int tickMillis) throws Exception {
        Files.createDirectories(directory);
        int chosen = port == 0 ? freePort() : port;
        Properties p = new Properties();
        p.setProperty("tickTime", Integer.toString(tickMillis));
        p.setProperty("initLimit", "10");
        p.setProperty("syncLimit", "5");
        p.setProperty("dataDir", directory.resolve("data").toAbsolutePath().toString());
        p.setProperty("clientPort", Integer.toString(chosen));
        p.setProperty("clientPortAddress", "127.0.0.1");
        p.setProperty("admin.enableServer", "false");
        p.setProperty("4lw.commands.whitelist", "ruok,stat");
        ZooKeeperServerEmbedded server = ZooKeeperServerEmbedded.builder().baseDir(directory)
                .configuration(p).exitHandler(ExitHandler.LOG_ONLY).build();
        server.start(30_000);
        return new EmbeddedZooKeeper(server, chosen);
    }

    /** {@code 127.0.0.1:port}. */
    public String connectString() {
        return "127.0.0.1:" + port;
    }

    @Override
    public void close() {
        server.close();
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }
}
