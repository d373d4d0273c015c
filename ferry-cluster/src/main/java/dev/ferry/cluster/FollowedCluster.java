package dev.ferry.cluster;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The training servers a serving cluster follows ({@code --follow}): the live members of a
 * cluster on ZooKeeper ({@code zk://host:port/name}, read at each poll, as {@code bin/ferry cluster
 * status} reads them), or a fixed list ({@code ferry://host:port,...}). When ZooKeeper cannot be
 * read, the members last read are kept, so the follower keeps asking them and reports its lag.
 */
public final class FollowedCluster implements Supplier<List<String>>, AutoCloseable {

    private static final Logger LOG = Logger.getLogger(FollowedCluster.class.getName());

    private final ClusterConfig config;
    private final String provider;
    private final List<String> fixed;
    private ClusterAdmin admin;
    private List<String> last = List.of();

    private FollowedCluster(ClusterConfig config, String provider, List<String> fixed) {
        this.config = config;
        this.provider = provider;
        this.fixed = fixed;
    }

    /**
     * The training cluster at {@code address}: {@code zk://host:port[,host:port]/name} or
     * {@code ferry://host:port,...}; members are called on their {@code provider} endpoint.
     *
     * @throws IllegalArgumentException for another form
     */
    public static FollowedCluster of(String address, String provider) {
        if (address.startsWith("ferry://")) {
            List<String> list = Arrays.stream(address.substring("ferry://".length()).split(","))
                    .map(String::trim).filter(s -> !s.isEmpty()).toList();
            if (list.isEmpty()) {
                throw new IllegalArgumentException("--follow ferry:// names no server: " + address);
            }
            return new FollowedCluster(null, provider, list);
        }
        if (address.startsWith("zk://")) {
            return new FollowedCluster(ClusterConfig.parse(address), provider, null);
        }
        throw new IllegalArgumentException("--follow takes zk://host:port/name or ferry://host:port,...: " + address);
    }

    /** The training servers' addresses now. */
    @Override
    public synchronized List<String> get() {
        if (fixed != null) {
            return fixed;
        }
        try {
            if (admin == null) {
                admin = ClusterAdmin.connect(config);
            }
            List<String> now = new ArrayList<>();
            for (MemberInfo m : admin.status().members().values()) {
                now.add(m.endpoints().getOrDefault(provider, m.address()));
            }
            last = List.copyOf(now);
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "cannot read the followed cluster " + config.uri() + "; keeping " + last + ": "
                    + e.getMessage());
        }
        return last;
    }

    @Override
    public synchronized void close() {
        if (admin != null) {
            admin.close();
            admin = null;
        }
    }
}
