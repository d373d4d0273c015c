package dev.ferry.ps.net;

import java.util.List;
import java.util.concurrent.TimeUnit;

import dev.ferry.ps.PsException;
import dev.ferry.ps.SlotTable;

/**
 * A {@link PsClient}'s first contact with its cluster: the first routing table, from any of the
 * given servers (asked again while the cluster's members have none yet, until the deadline),
 * and for a fixed cluster the check that each server is the one its position says.
 */
final class ClusterBootstrap {

    private ClusterBootstrap() {
    }

    /**
     * Fetches the first routing table into {@code routing}; for a fixed cluster (a table without
     * members) fixes the addresses and checks them.
     *
     * @throws PsException  {@code INVALID_ARGUMENT} if the servers do not form that cluster;
     *                      {@code WRONG_SERVER} if none had a routing table within the deadline
     * @throws dev.ferry.rpc.RpcException if no server can be reached within the deadline
     */
    static void join(RoutingFollower routing, TableDirectory directory, List<String> addresses, long deadlineMillis) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(deadlineMillis);
        while (true) {
            RuntimeException last = null;
            for (String address : addresses) {
                try {
                    ClientCalls.join(routing.fetchRouting(address));
                    last = null;
                    break;
                } catch (RuntimeException e) {
                    last = e;
                }
            }
            if (last == null) {
                break;
            }
            // Cluster members that have just joined answer before their first routing table
            // is installed: ask again until the call's deadline, then fail with that answer.
            if (!(last instanceof PsException ps) || ps.code() != PsException.Code.WRONG_SERVER
                    || PsDescriptor.wrongServerGeneration(ps) >= 0 || System.nanoTime() > deadline) {
                throw last;
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw last;
            }
        }
        if (routing.route().table().members().isEmpty()) {
            routing.fixAddresses(addresses);
            checkFixed(routing, directory, addresses);
        }
    }

    private static void checkFixed(RoutingFollower routing, TableDirectory directory, List<String> addresses) {
        SlotTable slots = routing.route().table().slots();
        List<ServerInfo> infos = directory.describeServers();
        for (int i = 0; i < infos.size(); i++) {
            ServerInfo info = infos.get(i);
            if (info.index() != i || info.serverCount() != addresses.size() || info.slotHash() != slots.hashCode()
                    || slots.serverCount() != addresses.size()) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "server " + addresses.get(i)
                        + " is server " + info.index() + " of " + info.serverCount()
                        + (info.slotHash() != slots.hashCode() ? " with another slot table" : "")
                        + "; the client was given it as server " + i + " of " + addresses.size());
            }
        }
    }
}
