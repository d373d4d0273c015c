package dev.ferry.transport.local;

import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportProvider;

/** Serves provider {@code local}: the in-JVM transport ({@link dev.ferry.transport.local}). */
public final class LocalTransportProvider implements TransportProvider {

    /** The provider name. */
    public static final String NAME = "local";

    /** Used by {@link java.util.ServiceLoader}. */
    public LocalTransportProvider() {
    }

    @Override
    public boolean supports(String provider) {
        return NAME.equals(provider);
    }

    @Override
    public Transport open(TransportConfig config, MessageHandler handler) {
        return new LocalTransport(config, handler);
    }
}
