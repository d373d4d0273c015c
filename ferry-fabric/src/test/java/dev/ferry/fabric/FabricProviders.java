package dev.ferry.fabric;

import java.util.Arrays;
import java.util.stream.Stream;

import org.junit.jupiter.params.provider.Arguments;

/**
 * The provider and endpoint-type cases tests run on: tcp over MSG, tcp over RDM (rxm) and shm
 * over RDM by default; {@code -Dferry.providers=verbs:MSG,verbs:RDM} picks others.
 */
final class FabricProviders {

    /**
     * The address sessions bind to: loopback by default; {@code -Dferry.host} names the address
     * of an RDMA interface, since verbs has no loopback device (rxe bound to {@code lo} gives
     * ENODEV in libfabric).
     */
    static final String HOST = System.getProperty("ferry.host", "127.0.0.1");

    private FabricProviders() {
    }

    static Stream<Arguments> cases() {
        String spec = System.getProperty("ferry.providers", "tcp:MSG,tcp:RDM,shm:RDM");
        return Arrays.stream(spec.split(",")).map(String::trim).filter(s -> !s.isEmpty()).map(s -> {
            String[] parts = s.split(":");
            return Arguments.of(parts[0], EndpointType.valueOf(parts.length > 1 ? parts[1] : "RDM"));
        });
    }
}
