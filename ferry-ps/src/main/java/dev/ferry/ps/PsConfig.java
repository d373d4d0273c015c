package dev.ferry.ps;

/**
 * The tunables of a {@link ParameterServer}, each with its default and the reason for it.
 *
 * @param maxIdsPerRequest largest pull or push, in ids. Default 1,048,576: a training batch of
 *                         8,192 examples with 128 features each. {@code PsClient} learns the
 *                         limits with the routing table and splits a bigger batch into several
 *                         requests, so that one request does not hold the shard locks for long
 * @param maxRequestBytes  largest pull response or push payload, in bytes of f32 values.
 *                         Default 64 MiB: a large rendezvous message; beyond it, splitting (done
 *                         by the client, as for ids) costs little next to moving the bytes
 * @param checkpointsKept  complete checkpoints kept in a checkpoint directory, newest first; at
 *                         least 2, so that a checkpoint found corrupt still has a good one
 *                         before it. Default 3
 */
public record PsConfig(int maxIdsPerRequest, long maxRequestBytes, int checkpointsKept) {

    /** Checks the values. */
    public PsConfig {
        if (maxIdsPerRequest < 1) {
            throw TableConfig.invalid("maxIdsPerRequest must be >= 1: " + maxIdsPerRequest);
        }
        if (maxRequestBytes < Float.BYTES) {
            throw TableConfig.invalid("maxRequestBytes must be >= 4: " + maxRequestBytes);
        }
        if (checkpointsKept < 2) {
            throw TableConfig.invalid("checkpointsKept must be >= 2: " + checkpointsKept);
        }
    }

    /** The defaults. */
    public static PsConfig defaults() {
        return new PsConfig(1 << 20, 64L << 20, 3);
    }

    /** These settings with other request limits. */
    public PsConfig withRequestLimits(int ids, long bytes) {
        return new PsConfig(ids, bytes, checkpointsKept);
    }

    /** These settings keeping another number of checkpoints. */
    public PsConfig withCheckpointsKept(int value) {
        return new PsConfig(maxIdsPerRequest, maxRequestBytes, value);
    }
}
