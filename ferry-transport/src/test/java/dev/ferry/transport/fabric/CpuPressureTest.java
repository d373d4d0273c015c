package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

import org.junit.jupiter.api.Test;

/** The runnable count read from /proc/loadavg lines, well formed and not. */
class CpuPressureTest {

    private static int runnable(String line) {
        byte[] bytes = line.getBytes(StandardCharsets.US_ASCII);
        return CpuPressure.runnable(ByteBuffer.wrap(bytes), bytes.length);
    }

    @Test
    void readsTheRunnableCount() {
        assertEquals(3, runnable("0.52 0.58 0.59 3/1234 5678\n"));
        assertEquals(17, runnable("34.75 24.06 13.93 17/2211 40123\n"));
        assertEquals(0, runnable("0.00 0.00 0.00 0/99 1\n"));
    }

    @Test
    void refusesWhatIsNotALoadavgLine() {
        assertEquals(-1, runnable(""));
        assertEquals(-1, runnable("0.52 0.58 0.59"));
        assertEquals(-1, runnable("0.52 0.58 0.59 3"));
        assertEquals(-1, runnable("0.52 0.58 0.59 x/12 5"));
        assertEquals(-1, runnable("0.52 0.58 0.59 /12 5"));
        assertEquals(-1, runnable("0.52 0.58 0.59 99999999999/12 5"));
    }
}
