package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.Transports;

/**
 * Clients that come and go on shm never make a server's frames look as if another server sent
 * them: two servers, a client that stays, and short-lived clients that connect to both servers
 * (in alternating order, so each one numbers the servers differently), exchange messages and
 * leave. Every message names its sender in its payload, and must arrive from that sender.
 *
 * <p>libfabric 1.17's shm keeps per-peer ids in both regions; removing an address from the
 * address vector frees the slot but leaves the id the peer had given, so the next client put
 * in that slot is sent frames stamped with the previous client's numbering.
 */
@Timeout(120)
class ShmPeerIdReuseTest extends FabricTransportFixture {

    private static final int ROUNDS = Integer.getInteger("ferry.shmPeerIdReuse.rounds", 30);
    private static final int PER_ROUND = 20;

    private static TransportConfig config() {
        return TransportConfig.defaults("shm").withPools(16L << 20, 16L << 20, 16L << 20);
    }

    /** A server: answers each message with one naming this server; checks who asked. */
    private static MessageHandler server(int me, List<String> problems) {
        return (from, m) -> {
            int asker = m.segment().get(ValueLayout.JAVA_INT_UNALIGNED, 0);
            int seq = m.segment().get(ValueLayout.JAVA_INT_UNALIGNED, 4);
            m.release();
            if (from.isOpen()) {
                var reply = from.tryAllocate(16);
                if (reply == null) {
                    problems.add("server " + me + " had no buffer to answer");
                    return;
                }
                reply.segment().set(ValueLayout.JAVA_INT_UNALIGNED, 0, me);
                reply.segment().set(ValueLayout.JAVA_INT_UNALIGNED, 4, seq);
                reply.segment().set(ValueLayout.JAVA_INT_UNALIGNED, 8, asker);
                from.sendAndForget(0, reply);
            }
        };
    }

    /** A client: counts answers per server and records any that came from the wrong one. */
    private static final class Client implements MessageHandler {
        final Map<String, Integer> serverOf;
        final List<String> problems;
        final AtomicInteger[] answers = {new AtomicInteger(), new AtomicInteger()};

        Client(Map<String, Integer> serverOf, List<String> problems) {
            this.serverOf = serverOf;
            this.problems = problems;
        }

        @Override
        public void onMessage(Peer from, InboundMessage m) {
            int server = m.segment().get(ValueLayout.JAVA_INT_UNALIGNED, 0);
            m.release();
            Integer expected = serverOf.get(from.address());
            if (expected == null || expected != server) {
                problems.add("an answer of server " + server + " arrived from " + from.address() + " (server "
                        + expected + ")");
            } else {
                answers[server].incrementAndGet();
            }
        }
    }

    private static List<CompletableFuture<Void>> ask(Peer peer, int asker, int count) {
        List<CompletableFuture<Void>> sent = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            var m = peer.allocate(16);
            m.segment().set(ValueLayout.JAVA_INT_UNALIGNED, 0, asker);
            m.segment().set(ValueLayout.JAVA_INT_UNALIGNED, 4, i);
            sent.add(peer.send(0, m));
        }
        return sent;
    }

    @Test
    void framesOfOneServerNeverArriveAsAnothersWhileClientsComeAndGo() throws Exception {
        List<String> problems = new CopyOnWriteArrayList<>();
        Transport[] servers = {open(config(), server(0, problems)), open(config(), server(1, problems))};
        Map<String, Integer> serverOf = new ConcurrentHashMap<>();
        serverOf.put(servers[0].localAddress(), 0);
        serverOf.put(servers[1].localAddress(), 1);
        Client stays = new Client(serverOf, problems);
        Transport load = open(config(), stays);
        Peer[] toServer = {load.connect(servers[0].localAddress()), load.connect(servers[1].localAddress())};
        int expectedStays = 0;
        for (int round = 0; round < ROUNDS; round++) {
            Client visits = new Client(serverOf, problems);
            try (Transport visitor = Transports.open(config(), visits)) {
                int first = round % 2;
                Peer a = visitor.connect(servers[first].localAddress());
                Peer b = visitor.connect(servers[1 - first].localAddress());
                List<CompletableFuture<Void>> sent = new ArrayList<>();
                sent.addAll(ask(a, 100 + round, PER_ROUND));
                sent.addAll(ask(b, 100 + round, PER_ROUND));
                sent.addAll(ask(toServer[0], 0, PER_ROUND));
                sent.addAll(ask(toServer[1], 0, PER_ROUND));
                expectedStays += PER_ROUND;
                for (CompletableFuture<Void> f : sent) {
                    f.get(20, TimeUnit.SECONDS);
                }
                int want = expectedStays;
                assertTrue(waitFor(() -> !problems.isEmpty() || visits.answers[0].get() == PER_ROUND
                        && visits.answers[1].get() == PER_ROUND && stays.answers[0].get() == want
                        && stays.answers[1].get() == want, 20_000),
                        "round " + round + ": visitor " + visits.answers[0] + "/" + visits.answers[1] + ", load "
                                + stays.answers[0] + "/" + stays.answers[1] + "; " + problems);
                assertEquals(List.of(), problems, "round " + round);
            }
        }
        for (Transport t : List.of(servers[0], servers[1], load)) {
            assertEquals(0, t.counters().linkFailures(), "link failures of " + t.localAddress());
        }
    }
}
