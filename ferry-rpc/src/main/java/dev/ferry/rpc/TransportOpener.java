package dev.ferry.rpc;

import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.Transports;

/** Opens a transport for the RPC layer; a seam for decorators such as fault injection. */
@FunctionalInterface
public interface TransportOpener {

    /** The plain transports of {@link Transports#open}. */
    TransportOpener DEFAULT = Transports::open;

    /** Opens a transport that delivers inbound messages to {@code handler}. */
    Transport open(TransportConfig config, MessageHandler handler);
}
