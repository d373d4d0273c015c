package dev.ferry.ps.net;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;

import dev.ferry.ps.ParameterServer;
import dev.ferry.rpc.RpcClient;

/**
 * In-process members over tcp driven by a raw RPC client, for the replica and move tests that
 * install routing tables and send requests by hand; index {@code i} of each list is member
 * {@code i}.
 */
abstract class RawMembersTestBase extends PsNetTestBase {

    final List<String> addresses = new ArrayList<>();
    final List<PsServer> servers = new ArrayList<>();
    final List<ParameterServer> stores = new ArrayList<>();
    RpcClient raw;

    /** Opens members {@code ids} (with table "t" if {@code withTable}) and the raw client. */
    void startMembers(List<String> ids, boolean withTable) {
        openMembers("tcp", ids, addresses, servers, stores, withTable);
        raw = RpcClient.open(rpc(), config("tcp"));
    }

    @AfterEach
    void closeRaw() {
        if (raw != null) {
            raw.close();
        }
    }
}
