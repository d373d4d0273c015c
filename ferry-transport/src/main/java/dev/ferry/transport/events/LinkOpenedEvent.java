package dev.ferry.transport.events;

import jdk.jfr.Category;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/** A link (queue pair, or peer address on the shared endpoint) became ready. */
@Name("dev.ferry.transport.LinkOpened")
@Label("Link Opened")
@Category({"Ferry", "Transport"})
@StackTrace(false)
final class LinkOpenedEvent extends jdk.jfr.Event {
    @Label("Provider")
    String provider;
    @Label("Peer")
    String peer;
    @Label("Link Id")
    int linkId;
    @Label("Links Open")
    int linksOpen;
}
