package dev.ferry.bench.stream;

import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Short runs of the engine against a real server child: sane figures, and no child left behind. */
@Timeout(120)
class StreamBenchmarkTest {

    private static final List<String> JSON_KEYS = List.of("workload", "transport", "provider", "size", "messages",
            "seconds", "msgs_per_s", "mib_per_s", "mean_us", "p50_us", "p99_us", "p999_us", "counters",
            "credit_stalls", "window_stalls", "eager", "rendezvous");

    private static StreamSpec brief(String provider, int size) {
        return StreamSpec.of(provider, size).withSeconds(0.7, 0.3);
    }

    private static void assertSane(StreamResult r, String transport) {
        assertTrue(r.messages() > 0, "no messages: " + r.text());
        assertTrue(r.seconds() > 0, r.text());
        assertTrue(r.messagesPerSecond() > 0 && r.mebibytesPerSecond() > 0, r.text());
        assertTrue(r.p50Us() > 0 && r.p50Us() <= r.p99Us() && r.p99Us() <= r.p999Us(), r.text());
        // A send completes once the data is out of the sender's hands (shm: in the receiver's queue;
        // netty: in the socket), so the server's count, read at the end, may trail the client's.
        assertTrue(r.server().messagesReceived() > 0, "the server saw no messages: " + r.text());
        String json = r.json();
        assertTrue(json.startsWith("{") && json.endsWith("}") && !json.contains("\n"), json);
        for (String key : JSON_KEYS) {
            assertTrue(json.contains("\"" + key + "\":"), "missing " + key + " in " + json);
        }
        assertTrue(json.contains("\"transport\":\"" + transport + "\""), json);
        assertChildGone(r);
    }

    private static void assertChildGone(StreamResult r) {
        assertFalse(ProcessHandle.of(r.serverPid()).map(ProcessHandle::isAlive).orElse(false),
                "server child " + r.serverPid() + " still runs");
    }

    @ParameterizedTest(name = "{0} {1} B")
    @CsvSource({"shm, 64", "shm, 65536", "netty, 64"})
    void transportStreamCountsEveryMessage(String provider, int size) {
        StreamResult r = StreamBenchmark.run(brief(provider, size));
        assertSane(r, provider.equals("netty") ? "netty" : "fabric");
        assertEquals(size, r.spec().size());
        if (!provider.equals("netty")) {
            boolean eager = size <= 16 * 1024;
            assertTrue(eager ? r.client().eager() >= r.messages() : r.client().rendezvous() >= r.messages(),
                    "eager/rendezvous counters: " + r.text());
        }
    }

    @Test
    void rawStreamOnShm() {
        StreamResult r = StreamBenchmark.run(brief("shm", 4096).withImplementation(StreamSpec.Implementation.RAW));
        assertSane(r, "raw");
        assertEquals(r.messages(), r.client().eager());
    }

    @Test
    void pingPongThroughTheTransport() {
        StreamResult r = StreamBenchmark.run(brief("netty", 64).withMode(StreamSpec.Mode.PINGPONG));
        assertSane(r, "netty");
        assertTrue(r.json().contains("\"workload\":\"pingpong\""), r.json());
    }

    @Test
    void aCountedRunSendsExactlyThatMany() {
        StreamResult r = StreamBenchmark.run(StreamSpec.of("shm", 256).withMessages(5_000).withSeconds(0, 0.2));
        assertEquals(5_000, r.messages());
        assertChildGone(r);
    }

    @Test
    void badSpecsAreRefused() {
        assertThrows(IllegalArgumentException.class,
                () -> StreamSpec.of("netty", 64).withImplementation(StreamSpec.Implementation.RAW));
        assertThrows(IllegalArgumentException.class, () -> StreamSpec.of("shm", -1));
        assertThrows(IllegalArgumentException.class, () -> StreamSpec.of("shm", 64).withSeconds(0, 0));
    }
}
