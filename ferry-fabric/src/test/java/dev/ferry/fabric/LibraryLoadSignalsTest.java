package dev.ferry.fabric;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Loading libfabric installs no signal handler of its own: libpsm2's and libinfinipath's
 * constructors (run by the load) would take SIGSEGV and five others until {@link SignalGuard}
 * put the JVM's back, and a JVM SIGSEGV on another thread in that window ended the process. In a
 * fresh JVM, since this one has loaded libfabric long ago.
 */
@Timeout(60)
class LibraryLoadSignalsTest {

    /** The child: loads libfabric and nothing else, prints how many handlers had to be put back. */
    public static void main(String[] args) throws ClassNotFoundException {
        Class.forName("dev.ferry.fabric.LibFabric", true, LibraryLoadSignalsTest.class.getClassLoader());
        System.out.println("restored " + SignalGuard.restoredCount());
        System.out.println("foreign " + SignalGuard.foreignHandlers());
    }

    @Test
    void loadingLibfabricInstallsNoForeignHandler() throws IOException, InterruptedException {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder builder = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-cp",
                System.getProperty("java.class.path"), LibraryLoadSignalsTest.class.getName());
        builder.environment().remove("HFI_NO_BACKTRACE");
        builder.environment().remove("IPATH_NO_BACKTRACE");
        builder.redirectErrorStream(true);
        Process child = builder.start();
        String output = new String(child.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(child.waitFor(30, TimeUnit.SECONDS), "the child did not end");
        assertEquals(0, child.exitValue(), output);
        List<String> lines = output.lines().filter(l -> l.startsWith("restored ") || l.startsWith("foreign ")).toList();
        assertEquals(List.of("restored 0", "foreign []"), lines, output);
    }
}
