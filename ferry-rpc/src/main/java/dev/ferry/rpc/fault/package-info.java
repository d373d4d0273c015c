/**
 * Fault injection, built in: a {@link dev.ferry.rpc.fault.FaultyTransport} decorates any
 * transport and, on command, fails links now (closing the real peer), drops or delays the next
 * frames, or refuses connects; a {@link dev.ferry.rpc.fault.FaultInjector} opens such transports
 * for a client or server and commands all of them. The recovery tests break the transport on
 * purpose with it.
 */
package dev.ferry.rpc.fault;
