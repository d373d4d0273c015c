package dev.ferry.transport;

/**
 * A transport implementation, found with {@link java.util.ServiceLoader}. Implementations
 * register in {@code META-INF/services/dev.ferry.transport.TransportProvider}.
 */
public interface TransportProvider {

    /** Whether this implementation serves {@code config.provider()}. */
    boolean supports(String provider);

    /** Opens a transport; inbound messages go to {@code handler}. */
    Transport open(TransportConfig config, MessageHandler handler);
}
