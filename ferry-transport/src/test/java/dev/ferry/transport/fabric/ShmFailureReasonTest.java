package dev.ferry.transport.fabric;

import dev.ferry.transport.AbstractFailureReasonTest;
import dev.ferry.transport.TransportConfig;

/** Failure reasons over libfabric's shm provider. */
class ShmFailureReasonTest extends AbstractFailureReasonTest {

    @Override
    protected TransportConfig config() {
        return TransportConfig.defaults("shm").withPools(16L << 20, 64L << 20, 64L << 20);
    }
}
