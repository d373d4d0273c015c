package dev.ferry.cli;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The launchers' set-up checks ({@code bin/setup-lib.sh}) hold hundreds of times in a row under
 * {@code set -o pipefail}: {@code src/test/sh/setup-lib-test.sh} runs them against a linker cache
 * that makes an early-exiting reader fail every time, and against this machine's.
 */
@Timeout(120)
class SetupScriptTest {

    @Test
    void theLibfabricCheckNeverFailsOnAPipe() throws IOException, InterruptedException {
        Path script = Path.of("src/test/sh/setup-lib-test.sh").toAbsolutePath();
        Path lib = Path.of("../bin/setup-lib.sh").toAbsolutePath().normalize();
        assertTrue(Files.isRegularFile(lib), lib + " is missing");
        ProcessBuilder builder = new ProcessBuilder("bash", script.toString(), "200", lib.toString())
                .redirectErrorStream(true);
        builder.environment().put("JAVA_HOME", System.getProperty("java.home"));
        Process process = builder.start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(process.waitFor(100, TimeUnit.SECONDS), "the script still runs");
        assertEquals(0, process.exitValue(), output);
        assertTrue(output.matches("(?s).*setup-lib-test: \\d+ checks passed\\s*"), output);
    }
}
