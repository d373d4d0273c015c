package dev.ferry.ps.net;

import java.util.List;

/**
 * A routing table and the addresses of its servers, in server order (the table's own in a
 * cluster run by a controller; the ones given to {@link PsClient#connect} in a fixed cluster).
 * Immutable: the client replaces it whole when a newer table arrives.
 */
record Route(RoutingTable table, List<String> addresses) {

    long generation() {
        return table.generation();
    }
}
