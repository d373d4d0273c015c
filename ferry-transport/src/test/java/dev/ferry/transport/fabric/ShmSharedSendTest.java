package dev.ferry.transport.fabric;

import dev.ferry.transport.AbstractTransportTest;
import dev.ferry.transport.TransportConfig;

/**
 * The behavioural suite over shm with every message of the send pool going by reference
 * ({@link TransportConfig#sharedSendBytes} of 1 byte): the receiver reads each in the sender's
 * shared slab, and releases it with RNDV_DONE, whatever its size.
 */
class ShmSharedSendTest extends AbstractTransportTest {

    @Override
    protected TransportConfig config() {
        return TransportConfig.defaults("shm").withPools(64L << 20, 256L << 20, 256L << 20).withSharedSendBytes(1);
    }
}
