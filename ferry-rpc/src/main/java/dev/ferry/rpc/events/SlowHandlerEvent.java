package dev.ferry.rpc.events;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.Timespan;

/** A server handler run that took at least {@link RpcEvents#SLOW_CALL_NANOS}. */
@Name("dev.ferry.rpc.SlowHandler")
@Label("Slow RPC Handler")
@Category({"Ferry", "RPC"})
@Description("A server handler that ran longer than ferry.rpc.slowCallMillis; the stack trace shows its thread")
final class SlowHandlerEvent extends jdk.jfr.Event {
    @Label("Method")
    int method;
    @Label("Call Id")
    long callId;
    @Label("Latency")
    @Timespan(Timespan.NANOSECONDS)
    long latency;
    @Label("Succeeded")
    @Description("False if the handler threw")
    boolean ok;
}
