package dev.ferry.transport.local;

import dev.ferry.transport.AbstractTransportTest;
import dev.ferry.transport.TransportConfig;

/** The behavioural suite on the in-JVM transport. */
class LocalTransportTest extends AbstractTransportTest {

    @Override
    protected TransportConfig config() {
        return TransportConfig.defaults("local").withPools(64L << 20, 32L << 20, 32L << 20);
    }
}
