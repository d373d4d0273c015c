package dev.ferry.bench.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;

import org.junit.jupiter.api.Test;

/** The id and batch-size streams have the distributions the issue asks for. */
class IdGeneratorTest {

    @Test
    void zipfFrequenciesFollowThePowerLaw() {
        long space = 100_000;
        double alpha = 1.09;
        double harmonic = 0;
        for (long k = 1; k <= space; k++) {
            harmonic += Math.pow(k, -alpha);
        }
        IdGenerator generator = new IdGenerator(7, space, alpha, 4096, 4096);
        long[] ids = new long[4096];
        long[] counts = new long[4];
        long total = 0;
        for (int round = 0; round < 200; round++) {
            generator.fill(ids, ids.length);
            for (long id : ids) {
                assertTrue(id >= 0 && id < space, "id " + id);
                if (id < counts.length) {
                    counts[(int) id]++;
                }
            }
            total += ids.length;
        }
        for (int k = 0; k < counts.length; k++) {
            double expected = Math.pow(k + 1, -alpha) / harmonic;
            double seen = counts[k] / (double) total;
            assertEquals(expected, seen, expected * 0.1, "frequency of rank " + (k + 1));
        }
    }

    @Test
    void batchSizesAreLogUniform() {
        IdGenerator generator = new IdGenerator(7, 1000, 0, 16, 4096);
        int[] sizes = new int[20_000];
        for (int i = 0; i < sizes.length; i++) {
            sizes[i] = generator.batchSize();
            assertTrue(sizes[i] >= 16 && sizes[i] <= 4096, "size " + sizes[i]);
        }
        Arrays.sort(sizes);
        // The median of log-uniform on [16, 4097) is their geometric mean, about 256.
        int median = sizes[sizes.length / 2];
        assertTrue(median > 220 && median < 300, "median " + median);
        assertEquals(4, new IdGenerator(1, 10, 0, 4, 4).batchSize());
    }
}
