package dev.ferry.transport.netty;

import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportProvider;
import java.util.Objects;

/** Serves provider {@code netty}: the kernel-TCP transport. */
public final class NettyTransportProvider implements TransportProvider {

    /** The provider name this implementation serves. */
    public static final String NAME = "netty";

    /** For {@link java.util.ServiceLoader}. */
    public NettyTransportProvider() {
    }

    @Override
    public boolean supports(String provider) {
        return NAME.equals(provider);
    }

    @Override
    public Transport open(TransportConfig config, MessageHandler handler) {
        Objects.requireNonNull(handler, "handler");
        return new NettyTransport(config, handler);
    }
}
