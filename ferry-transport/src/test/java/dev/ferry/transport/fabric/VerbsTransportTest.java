package dev.ferry.transport.fabric;

import dev.ferry.transport.AbstractTransportTest;
import dev.ferry.transport.TransportConfig;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;

/**
 * The behavioural suite over libfabric's verbs provider: InfiniBand or RoCE NICs, or Soft-RoCE
 * in the guest of {@code bin/verbs-check}. It runs only when asked for, with
 * {@code -Dferry.transport.provider=verbs} ({@code verbs/msg}, {@code verbs/rdm}) or a
 * {@code -Dferry.providers} list naming verbs, and {@code -Dferry.host} set to the address of
 * the RDMA interface. Under {@code -Dferry.test.scale=guest} (emulated CPUs, ~10x slower) the
 * runs are smaller; the tests are the same.
 */
class VerbsTransportTest extends AbstractTransportTest {

    private static final String PROVIDER = System.getProperty("ferry.transport.provider", "verbs");
    private static final boolean GUEST = "guest".equals(System.getProperty("ferry.test.scale"));

    @BeforeAll
    static void onlyWhenAsked() {
        Assumptions.assumeTrue(System.getProperty("ferry.transport.provider") != null
                        || System.getProperty("ferry.providers", "").contains("verbs"),
                "verbs runs when asked for: -Dferry.providers=verbs:MSG,... or -Dferry.transport.provider=verbs");
    }

    @Override
    protected TransportConfig config() {
        // As for tcp: 64 peers with 2 links each, 66 buffers of 16 KiB per link.
        return onTestHost(TransportConfig.defaults(PROVIDER).withPools(64L << 20, 320L << 20, 256L << 20));
    }

    @Override
    protected int mixedMessages() {
        return GUEST ? 1_000 : super.mixedMessages();
    }

    @Override
    protected int mixedStreams() {
        return GUEST ? 50 : super.mixedStreams();
    }

    @Override
    protected int largeMessages() {
        return GUEST ? 3 : super.largeMessages();
    }

    @Override
    protected int largestMessage() {
        return GUEST ? 4 << 20 : super.largestMessage();
    }

    /** Under emulation the sender needs longer than 2 s to fill every credit before the check. */
    @Override
    protected long stallMillis() {
        return GUEST ? 10_000 : super.stallMillis();
    }

    /**
     * 8 peers under emulation. With 64, the receiver's 128 links overcommit its completion
     * queue on verbs: each verbs endpoint reserves its receive queue size (384 by default) in
     * the CQ it is bound to, the transport's 8192-entry CQ covers 21 links, later ones reserve
     * nothing ("Rx CQ is fully reserved"), and the test timed out in the guest. Real NICs
     * reserve the same way, so at other scales the full 64 peers keep showing it.
     */
    @Override
    protected int clientPeers() {
        return GUEST ? 8 : super.clientPeers();
    }
}
