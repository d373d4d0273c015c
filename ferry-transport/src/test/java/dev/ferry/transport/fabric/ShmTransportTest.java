package dev.ferry.transport.fabric;

import dev.ferry.transport.AbstractTransportTest;
import dev.ferry.transport.TransportConfig;

/** The behavioural suite over libfabric's shm provider (reliable datagrams, kernel bypass). */
class ShmTransportTest extends AbstractTransportTest {

    @Override
    protected TransportConfig config() {
        return TransportConfig.defaults("shm").withPools(64L << 20, 256L << 20, 256L << 20);
    }
}
