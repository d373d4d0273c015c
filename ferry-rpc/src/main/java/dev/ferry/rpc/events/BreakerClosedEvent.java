package dev.ferry.rpc.events;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Timespan;

/** A server's circuit breaker closed: a probe found the fabric working and traffic moved back. */
@Name("dev.ferry.rpc.BreakerClosed")
@Label("Circuit Breaker Closed")
@Category({"Ferry", "RPC"})
@Description("A probe of the fabric succeeded: the server's traffic moved back from the fallback")
@StackTrace(false)
final class BreakerClosedEvent extends jdk.jfr.Event {
    @Label("Server")
    String server;
    @Label("Open For")
    @Description("How long the traffic was on the fallback")
    @Timespan(Timespan.NANOSECONDS)
    long openFor;
}
