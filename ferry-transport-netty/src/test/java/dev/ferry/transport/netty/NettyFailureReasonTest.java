package dev.ferry.transport.netty;

import dev.ferry.transport.AbstractFailureReasonTest;
import dev.ferry.transport.TransportConfig;

/** Failure reasons on the Netty transport. */
class NettyFailureReasonTest extends AbstractFailureReasonTest {

    @Override
    protected TransportConfig config() {
        return TransportConfig.defaults(NettyTransportProvider.NAME);
    }

    @Override
    protected boolean authenticates() {
        return false; // the RPC layer authenticates Netty connections
    }
}
