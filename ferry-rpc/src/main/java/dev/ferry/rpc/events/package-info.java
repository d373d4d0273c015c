/**
 * Flight-recorder ({@code jdk.jfr}) events of the RPC layer: calls and handler runs slower than
 * a threshold, and the circuit breaker that moves a server's traffic to the fallback transport
 * and back. {@link dev.ferry.rpc.events.RpcEvents} is the only entry: each method costs one
 * branch when the event is off. Names are {@code dev.ferry.rpc.*}; see {@code docs/observability.md}.
 */
package dev.ferry.rpc.events;
