package dev.ferry.transport.fabric;

import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportProvider;

/**
 * Serves every libfabric provider name ({@code shm}, {@code tcp}, {@code verbs}, {@code efa},
 * optionally suffixed {@code /msg} or {@code /rdm}); {@code netty} is left to the kernel-TCP
 * transport and {@code local} to the in-JVM one.
 */
public final class FabricTransportProvider implements TransportProvider {

    /** Used by {@link java.util.ServiceLoader}. */
    public FabricTransportProvider() {
    }

    @Override
    public boolean supports(String provider) {
        return !provider.isBlank() && !provider.equals("netty") && !provider.equals("grpc")
                && !provider.equals("local");
    }

    @Override
    public Transport open(TransportConfig config, MessageHandler handler) {
        return new FabricTransport(config, handler);
    }
}
