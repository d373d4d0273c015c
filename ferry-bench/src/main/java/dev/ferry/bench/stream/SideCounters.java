package dev.ferry.bench.stream;

import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

import dev.ferry.transport.TransportCounters;

/**
 * The flow-control counters of one side of a run. For the transport they are the differences
 * of its {@link TransportCounters} over the run; for the raw stream they are the benchmark's own:
 * waits for a credit, waits for a free send slot, and every message counted as eager.
 *
 * @param creditStalls times a send waited for a receive credit
 * @param windowStalls times a send waited for room in a send window
 * @param eager messages sent in one send
 * @param rendezvous messages sent by rendezvous (pulled by the receiver)
 * @param messagesSent messages whose send completed
 * @param messagesReceived messages delivered
 */
public record SideCounters(long creditStalls, long windowStalls, long eager, long rendezvous, long messagesSent,
        long messagesReceived) {

    /** Nothing counted. */
    public static final SideCounters NONE = new SideCounters(0, 0, 0, 0, 0, 0);

    /** The counters of a transport snapshot. */
    public static SideCounters of(TransportCounters c) {
        return new SideCounters(c.creditStalls(), c.windowStalls(), c.eagerSent(), c.rendezvousSent(), c.messagesSent(),
                c.messagesReceived());
    }

    /** What was counted between {@code before} and this snapshot. */
    public SideCounters minus(SideCounters before) {
        return new SideCounters(creditStalls - before.creditStalls, windowStalls - before.windowStalls,
                eager - before.eager, rendezvous - before.rendezvous, messagesSent - before.messagesSent,
                messagesReceived - before.messagesReceived);
    }

    /** The counters as {@code key=value} words, for the server's control line. */
    public String line() {
        return "credit_stalls=" + creditStalls + " window_stalls=" + windowStalls + " eager=" + eager
                + " rendezvous=" + rendezvous + " sent=" + messagesSent + " received=" + messagesReceived;
    }

    /** Parses {@link #line()}; unknown words are ignored. */
    public static SideCounters parse(String line) {
        Map<String, Long> values = new HashMap<>();
        for (String word : line.trim().split("\\s+")) {
            int eq = word.indexOf('=');
            if (eq > 0) {
                values.put(word.substring(0, eq), Long.parseLong(word.substring(eq + 1)));
            }
        }
        return new SideCounters(values.getOrDefault("credit_stalls", 0L), values.getOrDefault("window_stalls", 0L),
                values.getOrDefault("eager", 0L), values.getOrDefault("rendezvous", 0L),
                values.getOrDefault("sent", 0L), values.getOrDefault("received", 0L));
    }

    /** The JSON object of the four flow-control figures. */
    String jsonFields() {
        return String.format(Locale.ROOT, "\"credit_stalls\":%d,\"window_stalls\":%d,\"eager\":%d,\"rendezvous\":%d",
                creditStalls, windowStalls, eager, rendezvous);
    }

    /** One line for people. */
    String text() {
        return String.format(Locale.ROOT, "credit stalls %d, window stalls %d, eager %d, rendezvous %d, received %d",
                creditStalls, windowStalls, eager, rendezvous, messagesReceived);
    }
}
