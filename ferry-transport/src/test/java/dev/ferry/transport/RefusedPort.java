package dev.ferry.transport;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;

/**
 * A port nobody listens on, held until closed: a socket bound to it but not listening. A connect
 * to it is refused, and no listener (a transport's under test included) can take it meanwhile; a
 * port found free and given back could be taken by the next listener opened.
 */
public final class RefusedPort implements AutoCloseable {

    private final Socket holder = new Socket();
    private final String host;

    private RefusedPort(InetAddress address) {
        try {
            holder.bind(new InetSocketAddress(address, 0));
        } catch (IOException e) {
            closeQuietly();
            throw new UncheckedIOException("cannot bind a port on " + address, e);
        }
        this.host = address.getHostAddress();
    }

    /** A refused port on the loopback address. */
    public static RefusedPort onLoopback() {
        return new RefusedPort(InetAddress.getLoopbackAddress());
    }

    /** A refused port on {@code host}. */
    public static RefusedPort on(String host) {
        try {
            return new RefusedPort(InetAddress.getByName(host));
        } catch (IOException e) {
            throw new UncheckedIOException("unknown host " + host, e);
        }
    }

    public int port() {
        return holder.getLocalPort();
    }

    /** {@code host:port}, as transports take addresses. */
    public String address() {
        return host + ":" + port();
    }

    @Override
    public void close() {
        closeQuietly();
    }

    private void closeQuietly() {
        try {
            holder.close();
        } catch (IOException e) {
            // nothing held any more either way
        }
    }
}
