package dev.ferry.bench.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;

class CpuTimeTest {

    @Test
    void aJvmsCompilerThreadsAreFoundAndCountedWithinItsCpu() {
        long self = ProcessHandle.current().pid();
        long compilers = CpuTime.compilerNanos(self);
        long all = CpuTime.nanos(self);
        // JUnit's start alone has the JIT compile hundreds of methods: more than one 10 ms tick.
        assertTrue(compilers > 0, "compiler threads' CPU " + compilers + " ns of " + all);
        assertTrue(compilers <= all, "compiler threads' CPU " + compilers + " ns above the process's " + all);
    }

    @Test
    void aProcessThatIsGoneReadsAsMinusOne() {
        assertEquals(-1, CpuTime.compilerNanos(Long.MAX_VALUE));
        assertEquals(-1, CpuTime.nanos(Long.MAX_VALUE));
        assertEquals(0, CpuTime.compilerNanos(List.of(Long.MAX_VALUE)));
    }
}
