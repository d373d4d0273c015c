package dev.ferry.transport.fabric;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.Transports;

/**
 * The peer that {@link KilledPeerTest} kills: a JVM that opens a transport, connects to the
 * address given, says {@code READY}, then sends small and large (rendezvous) messages until it
 * is killed, releasing whatever it receives. Arguments: provider, bind host, address to connect
 * to, and optionally {@code hold-lock}: then it sends a few messages only, and on a {@code LOCK}
 * line on its standard input takes its own shm region lock and keeps it ({@code LOCKED true}),
 * as a process killed inside shm's progress would; or {@code hold-peer-lock}: the same with the
 * region lock of the peer it connected to, as a sender killed inside {@code fi_send} would; or
 * {@code bulk}: messages of {@link #BULK_BYTES} (rendezvous), one at a time, each sent once the
 * last completed, so that the receiver pulls each alone; or {@code shared}: {@link #SHARED_MESSAGES}
 * messages by reference ({@link TransportConfig#sharedSendBytes}), each filled with its number plus
 * one, then it says {@code SENT} and waits.
 */
public final class KilledPeerChild {

    /** A {@code shared} child's messages: sent by reference, then it waits to be killed. */
    static final int SHARED_MESSAGES = 12;
    static final int SHARED_BYTES = 64 << 10;

    /** The size of a {@code bulk} child's messages. */
    static final int BULK_BYTES = 16 << 20;

    private KilledPeerChild() {
    }

    public static void main(String[] args) throws Exception {
        boolean shared = args.length > 3 && args[3].equals("shared");
        TransportConfig config = KilledPeerTest.config(args[0], args[1]);
        if (shared) {
            config = config.withSharedSendBytes(1024);
        }
        Transport transport = Transports.open(config, (from, message) -> message.release());
        System.out.println("OPENED " + transport.localAddress() + ", connecting to " + args[2]);
        System.out.flush();
        Peer peer = transport.connect(args[2]);
        System.out.println("READY " + transport.localAddress());
        System.out.flush();
        if (args.length > 3 && (args[3].equals("hold-lock") || args[3].equals("hold-peer-lock"))) {
            for (int seq = 0; seq < 8; seq++) {
                OutboundMessage message = peer.allocate(1 << 10);
                message.segment().fill((byte) seq);
                peer.send(seq % 4, message).get(60, TimeUnit.SECONDS);
            }
            java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in,
                    java.nio.charset.StandardCharsets.UTF_8));
            if ("LOCK".equals(in.readLine())) {
                boolean locked = args[3].equals("hold-lock") ? dev.ferry.fabric.ShmRegionLocks.holdOwnRegionLock()
                        : dev.ferry.fabric.ShmRegionLocks.holdRegionLock(
                                dev.ferry.fabric.ShmRegionLocks.open(((FabricPeer) peer).remoteFabricAddress));
                System.out.println("LOCKED " + locked);
                System.out.flush();
            }
            Thread.sleep(Long.MAX_VALUE);
        }
        if (shared) {
            for (int seq = 0; seq < SHARED_MESSAGES; seq++) {
                OutboundMessage message = peer.allocate(SHARED_BYTES);
                message.segment().fill((byte) (seq + 1));
                peer.send(0, message).get(60, TimeUnit.SECONDS); // delivered: the receiver holds it
            }
            System.out.println("SENT " + SHARED_MESSAGES);
            System.out.flush();
            Thread.sleep(Long.MAX_VALUE);
        }
        if (args.length > 3 && args[3].equals("bulk")) {
            for (int seq = 0; ; seq++) {
                OutboundMessage message = peer.allocate(BULK_BYTES);
                message.segment().fill((byte) seq);
                peer.send(0, message).get(60, TimeUnit.SECONDS);
            }
        }
        CompletableFuture<?>[] inFlight = new CompletableFuture<?>[8];
        for (int seq = 0; ; seq++) {
            int slot = seq % inFlight.length;
            if (inFlight[slot] != null) {
                inFlight[slot].get(60, TimeUnit.SECONDS);
            }
            OutboundMessage message = peer.allocate(KilledPeerTest.size(seq));
            message.segment().fill((byte) seq);
            inFlight[slot] = peer.send(seq % 4, message);
        }
    }
}
