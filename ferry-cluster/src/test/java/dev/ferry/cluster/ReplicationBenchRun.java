package dev.ferry.cluster;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

/**
 * Runs {@link ReplicationBench} on the test class path (off unless {@code -Dferry.bench.replication=true};
 * arguments in {@code -Dferry.bench.args="--pushes 20000 ..."}). Measures, asserts nothing.
 */
class ReplicationBenchRun {

    @Test
    @EnabledIfSystemProperty(named = "ferry.bench.replication", matches = "true")
    void pushLatencyWithAndWithoutReplicas() throws Exception {
        String args = System.getProperty("ferry.bench.args", "").strip();
        ReplicationBench.main(args.isEmpty() ? new String[0] : args.split("\\s+"));
    }
}
