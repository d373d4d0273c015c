package dev.ferry.rpc;

import java.io.IOException;

import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.TransportConfig;

/**
 * A test server in a JVM of its own, so that a test can kill it with SIGKILL: listens with
 * {@link TestService} on {@code provider} at {@code port}, prints {@code READY address}, then
 * {@code RUN seed} to the file {@code args[2]} for every run of {@link TestService#RECORD}. The secret comes from the
 * environment ({@value SharedSecret#ENV_SECRET}). Exits when its standard input closes.
 */
public final class ServerProcess {

    private ServerProcess() {
    }

    public static void main(String[] args) throws Exception {
        String provider = args[0];
        int port = Integer.parseInt(args[1]);
        TestService service = new TestService();
        // Each run goes to a file, unbuffered: a SIGKILL loses nothing written before it.
        java.io.FileOutputStream log = new java.io.FileOutputStream(args[2], true);
        service.onRecord = seed -> {
            synchronized (log) {
                try {
                    log.write(("RUN " + seed + "\n").getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }
        };
        RpcServer server = service.register(RpcServer.open(RpcConfig.defaults().withHandlerThreads(4)));
        TransportConfig config = RpcTestBase.transport(provider).withBindPort(port);
        long deadline = System.nanoTime() + 20_000_000_000L;
        String address = null;
        while (address == null) {
            try {
                address = server.listen(config);
            } catch (RuntimeException e) {
                // The port of the killed incarnation may linger a moment.
                if (System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(100);
            }
        }
        System.out.println("READY " + address);
        System.out.flush();
        try {
            while (System.in.read() >= 0) {
                // wait for the parent to go
            }
        } catch (IOException e) {
            // parent gone
        }
        server.close();
        System.exit(0);
    }
}
