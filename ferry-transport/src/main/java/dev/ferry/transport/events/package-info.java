/**
 * Flight-recorder ({@code jdk.jfr}) events of the transport: links opened and failed, sends
 * stalled for a receive credit or for room in the send window, rendezvous transfers pulled.
 * {@link dev.ferry.transport.events.TransportEvents} is the only entry, one line at each place
 * in the transport; each method costs one branch when its event is off. Names are
 * {@code dev.ferry.transport.*}; see {@code docs/observability.md}.
 */
package dev.ferry.transport.events;
