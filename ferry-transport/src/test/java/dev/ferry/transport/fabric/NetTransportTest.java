package dev.ferry.transport.fabric;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;

import dev.ferry.fabric.EndpointType;
import dev.ferry.fabric.FabricException;
import dev.ferry.fabric.FabricSession;
import dev.ferry.transport.AbstractTransportTest;
import dev.ferry.transport.TransportConfig;

/**
 * The behavioural suite over libfabric's {@code net} provider: the rewritten TCP provider of
 * libfabric 1.17 (named {@code tcp} from 1.18 on), connected endpoints, one per link. Skipped
 * where the library has no provider of that name.
 */
class NetTransportTest extends AbstractTransportTest {

    @BeforeAll
    static void onlyWhereLibfabricHasIt() {
        try (FabricSession probe = FabricSession.open("net", EndpointType.MSG, "127.0.0.1", true, 64)) {
            Assumptions.assumeTrue(probe != null);
        } catch (FabricException e) {
            Assumptions.abort("libfabric " + dev.ferry.fabric.Fabric.libraryVersion() + " has no net provider: " + e.getMessage());
        }
    }

    @Override
    protected TransportConfig config() {
        return TcpTransportTest.connected("net");
    }
}
