package dev.ferry.transport.events;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Timespan;

/** This side pulled a large message whole by RDMA reads (rendezvous). */
@Name("dev.ferry.transport.Rendezvous")
@Label("Rendezvous Transfer")
@Category({"Ferry", "Transport"})
@Description("A large message pulled by the receiver: from its announcement to its last read chunk")
@StackTrace(false)
final class RendezvousEvent extends jdk.jfr.Event {
    @Label("Provider")
    String provider;
    @Label("Peer")
    String peer;
    @Label("Link Id")
    int linkId;
    @Label("Size")
    @DataAmount
    long bytes;
    @Label("Chunks")
    int chunks;
    @Label("Pull Time")
    @Description("From the announcement to the last chunk read, waits for rendezvous memory included")
    @Timespan(Timespan.NANOSECONDS)
    long pullTime;
}
