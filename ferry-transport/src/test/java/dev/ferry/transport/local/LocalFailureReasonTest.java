package dev.ferry.transport.local;

import dev.ferry.transport.AbstractFailureReasonTest;
import dev.ferry.transport.TransportConfig;

/** Failure reasons on the in-JVM transport. */
class LocalFailureReasonTest extends AbstractFailureReasonTest {

    @Override
    protected TransportConfig config() {
        return TransportConfig.defaults("local").withPools(16L << 20, 16L << 20, 16L << 20);
    }

    @Override
    protected String malformedAddress() {
        return null; // any string may name a local transport
    }
}
