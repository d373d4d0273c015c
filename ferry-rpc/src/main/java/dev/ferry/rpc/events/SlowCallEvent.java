package dev.ferry.rpc.events;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Timespan;

/** A client call that took at least {@link RpcEvents#SLOW_CALL_NANOS}, from the call to its outcome. */
@Name("dev.ferry.rpc.SlowCall")
@Label("Slow RPC Call")
@Category({"Ferry", "RPC"})
@Description("A client call slower than ferry.rpc.slowCallMillis, from the call to its response or failure")
@StackTrace(false)
final class SlowCallEvent extends jdk.jfr.Event {
    @Label("Method")
    @Description("The method id (0x5001 pull, 0x5002 push, ...)")
    int method;
    @Label("Server")
    String server;
    @Label("Call Id")
    long callId;
    @Label("Latency")
    @Timespan(Timespan.NANOSECONDS)
    long latency;
    @Label("Succeeded")
    @Description("False if it failed: timeout, server unavailable, remote error or cancelled")
    boolean ok;
}
