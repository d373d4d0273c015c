package dev.ferry.transport;

import java.util.ServiceLoader;
import dev.ferry.transport.TransportException.Reason;

/** Opens transports by provider name. */
public final class Transports {

    private Transports() {
    }

    /**
     * Opens the transport that serves {@code config.provider()}.
     *
     * @throws TransportException if no implementation on the class path serves it, or it fails to open
     */
    public static Transport open(TransportConfig config, MessageHandler handler) {
        for (TransportProvider provider : ServiceLoader.load(TransportProvider.class)) {
            if (provider.supports(config.provider())) {
                return provider.open(config, handler);
            }
        }
        throw new TransportException(Reason.UNAVAILABLE, "no transport for provider '" + config.provider()
                + "' on the class path (fabric providers need ferry-transport, netty needs ferry-transport-netty)");
    }
}
