package dev.ferry.transport.events;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/** A link's queue began waiting for a receive credit: the peer posted no buffer for more. */
@Name("dev.ferry.transport.CreditStall")
@Label("Credit Stall")
@Category({"Ferry", "Transport"})
@Description("Sends on a link wait for a receive credit: the receiver holds its buffers or is slow to repost them")
@StackTrace(false)
final class CreditStallEvent extends jdk.jfr.Event {
    @Label("Provider")
    String provider;
    @Label("Peer")
    String peer;
    @Label("Link Id")
    int linkId;
    @Label("Queued")
    @Description("Messages waiting on the link")
    int queued;
    @Label("Link In Flight")
    @Description("Bytes sent on the link and not yet completed")
    @jdk.jfr.DataAmount
    long linkInFlight;
}
