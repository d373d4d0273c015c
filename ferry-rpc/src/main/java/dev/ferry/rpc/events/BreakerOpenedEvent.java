package dev.ferry.rpc.events;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Timespan;

/** A server's circuit breaker opened: its traffic moved to the fallback transport. */
@Name("dev.ferry.rpc.BreakerOpened")
@Label("Circuit Breaker Opened")
@Category({"Ferry", "RPC"})
@Description("Repeated fabric failures to one server moved its traffic to the fallback (TCP) transport")
@StackTrace(false)
final class BreakerOpenedEvent extends jdk.jfr.Event {
    @Label("Server")
    String server;
    @Label("Failures")
    @Description("Fabric failures within the window that opened it")
    int failures;
    @Label("Window")
    @Timespan(Timespan.NANOSECONDS)
    long window;
}
