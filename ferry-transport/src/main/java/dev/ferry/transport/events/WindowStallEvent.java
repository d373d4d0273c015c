package dev.ferry.transport.events;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/** A link's next message began waiting for room in the send window. */
@Name("dev.ferry.transport.WindowStall")
@Label("Window Stall")
@Category({"Ferry", "Transport"})
@Description("A send waits for bytes in flight to complete: the link's, the peer's or the process's window is full")
@StackTrace(false)
final class WindowStallEvent extends jdk.jfr.Event {
    @Label("Provider")
    String provider;
    @Label("Peer")
    String peer;
    @Label("Link Id")
    int linkId;
    @Label("Message Size")
    @DataAmount
    long messageBytes;
    @Label("Link In Flight")
    @DataAmount
    long linkInFlight;
    @Label("Link Rendezvous In Flight")
    @Description("Rendezvous bytes advertised on the link and not yet released by the peer")
    @DataAmount
    long linkRendezvousInFlight;
}
