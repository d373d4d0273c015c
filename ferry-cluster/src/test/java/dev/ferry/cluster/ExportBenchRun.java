package dev.ferry.cluster;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

/**
 * Runs {@link ExportBench} on the test class path (off unless {@code -Dferry.bench.export=true};
 * arguments in {@code -Dferry.bench.args="--seconds 10 ..."}). Measures, asserts nothing.
 */
class ExportBenchRun {

    @Test
    @EnabledIfSystemProperty(named = "ferry.bench.export", matches = "true")
    void exportVolumeAndCost() throws Exception {
        String args = System.getProperty("ferry.bench.args", "").strip();
        ExportBench.main(args.isEmpty() ? new String[0] : args.split("\\s+"));
    }
}
