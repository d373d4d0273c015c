package dev.ferry.ps.net;

import java.util.List;

import dev.ferry.ps.TableStats;

/**
 * What one server says of itself ({@code DESCRIBE}).
 *
 * @param address     where the client reached it
 * @param index       its place in the cluster, in {@code [0, serverCount)}
 * @param serverCount servers in its cluster
 * @param readOnly    whether it serves read-only (pushes rejected)
 * @param slotHash    the hash of the slot table it enforces; equal on every server of a cluster
 * @param tables      its tables and tensors, by name
 */
public record ServerInfo(String address, int index, int serverCount, boolean readOnly, int slotHash,
        List<Table> tables) {

    /** Copies the list. */
    public ServerInfo {
        tables = List.copyOf(tables);
    }

    /**
     * One table or tensor on the server.
     *
     * @param dense whether it is a dense tensor
     * @param stats its size on this server
     * @param pullFormat how pulls that name no format move its rows ({@code F32} for dense tensors)
     */
    public record Table(boolean dense, TableStats stats, dev.ferry.ps.PullFormat pullFormat) {
        /** A table pulled in f32 by default. */
        public Table(boolean dense, TableStats stats) {
            this(dense, stats, dev.ferry.ps.PullFormat.F32);
        }
    }
}
