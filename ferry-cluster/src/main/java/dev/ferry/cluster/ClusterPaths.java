package dev.ferry.cluster;

/**
 * The znodes of one cluster, under {@code /ferry/<name>}:
 * <pre>
 *  members/&lt;id&gt;     ephemeral   {@link MemberInfo}                       written by the member itself
 *  assignment        persistent  {@link Assignment}                       the controller only, by CAS
 *  controller/epoch  persistent  the controller epoch, decimal           bumped by each new controller
 *  controller/latch  LeaderLatch                                         every member takes part
 *  moves/&lt;id&gt;       persistent  "ready" or "failed: reason"            the move's source member
 *  drain/&lt;id&gt;       persistent  empty: member asked to leave cleanly   an operator (bin/ferry cluster remove)
 *  tables/&lt;name&gt;    persistent  a CREATE_TABLE body                    the member that created the table
 *  outofsync/r-&lt;n&gt;   persistent  sequential: a backup's id, then "group epoch" lines  a primary that lost it;
 *                                 the controller removes the backup from those in-sync sets and deletes the node
 * </pre>
 * Every controller write is {@code multi(check(controller/epoch, its version), setData(assignment,
 * version read))}: a deposed controller's write fails on the first check, a stale read on the second.
 */
final class ClusterPaths {

    final String root;
    final String members;
    final String assignment;
    final String epoch;
    final String latch;
    final String moves;
    final String drain;
    final String tables;
    final String outOfSync;

    ClusterPaths(ClusterConfig config) {
        root = config.root();
        members = root + "/members";
        assignment = root + "/assignment";
        epoch = root + "/controller/epoch";
        latch = root + "/controller/latch";
        moves = root + "/moves";
        drain = root + "/drain";
        tables = root + "/tables";
        outOfSync = root + "/outofsync";
    }

    String member(String id) {
        return members + "/" + id;
    }

    String move(long id) {
        return moves + "/" + id;
    }

    String drain(String id) {
        return drain + "/" + id;
    }

    String table(String name) {
        return tables + "/" + name;
    }
}
