package dev.ferry.transport.events;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/** A link was closed by an error or a bad frame; the peer's links fail with it. */
@Name("dev.ferry.transport.LinkFailed")
@Label("Link Failed")
@Category({"Ferry", "Transport"})
@StackTrace(false)
final class LinkFailedEvent extends jdk.jfr.Event {
    @Label("Provider")
    String provider;
    @Label("Peer")
    String peer;
    @Label("Link Id")
    int linkId;
    @Label("Reason")
    @Description("The error completion, bad frame or exhausted resource that closed it")
    String reason;
}
