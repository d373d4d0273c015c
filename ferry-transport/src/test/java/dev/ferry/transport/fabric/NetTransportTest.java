package dev.ferry.transport.fabric;

import dev.ferry.transport.AbstractTransportTest;
import dev.ferry.transport.TransportConfig;

/**
 * The behavioural suite over libfabric's {@code net} provider: the rewritten TCP provider of
 * libfabric 1.17 (named {@code tcp} from 1.18 on), connected endpoints, one per link.
 */
class NetTransportTest extends AbstractTransportTest {

    @Override
    protected TransportConfig config() {
        // As for tcp: 64 peers with 2 links each, 66 buffers of 16 KiB per link.
        return onTestHost(TransportConfig.defaults("net").withPools(64L << 20, 320L << 20, 256L << 20));
    }
}
