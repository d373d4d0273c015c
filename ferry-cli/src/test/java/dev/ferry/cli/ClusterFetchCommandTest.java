package dev.ferry.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code ferry bench fetch-move} end to end, short: ZooKeeper and two server processes, a third
 * joins after a second and groups move to it while two threads fetch; every fetched row is
 * checked unchanged by the command itself. Each phase must have fetches, the moves must have
 * happened, and no server process may be left.
 */
@Timeout(240)
class ClusterFetchCommandTest {

    private static final Pattern PHASE = Pattern.compile("(?m)^(before|during|after)\\s+(\\d+)\\s");

    @Test
    void fetchesGoOnThroughTheMovesAndTheRowsStayUnchanged() {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int status = FerryCommand.commandLine().setOut(new PrintWriter(out)).setErr(new PrintWriter(err)).execute(
                "bench", "fetch-move", "--servers", "2", "--clients", "2", "--ids", "4000", "--batch", "64",
                "--dimension", "8", "--warmup", "1", "--duration", "12", "--move-at", "1");
        String text = out.toString();
        System.out.print(text);
        assertEquals(0, status, text + err);
        assertTrue(text.contains("every fetched row checked unchanged"), text);
        Matcher m = Pattern.compile("(\\d+) moves in flight").matcher(text);
        assertTrue(m.find() && Integer.parseInt(m.group(1)) >= 1, text);
        Matcher phases = PHASE.matcher(text);
        int seen = 0;
        while (phases.find()) {
            assertTrue(Long.parseLong(phases.group(2)) > 0, "no fetches " + phases.group(1) + " the moves: " + text);
            seen++;
        }
        assertEquals(3, seen, text);
        assertEquals(0, ProcessHandle.current().descendants().filter(ProcessHandle::isAlive).count(),
                "server processes left");
    }
}
