package dev.ferry.transport.fabric;

import dev.ferry.transport.AbstractTransportTest;
import dev.ferry.transport.TransportConfig;

/** The behavioural suite over libfabric's tcp provider (connected endpoints, one per link). */
class TcpTransportTest extends AbstractTransportTest {

    @Override
    protected TransportConfig config() {
        return connected("tcp");
    }

    /**
     * The suite's configuration on a provider of connected endpoints: 64 peers with 2 links each,
     * 66 buffers of 16 KiB per link, which the receive pool must hold.
     */
    static TransportConfig connected(String provider) {
        return onTestHost(TransportConfig.defaults(provider).withPools(64L << 20, 320L << 20, 256L << 20));
    }
}
