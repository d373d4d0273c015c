/**
 * Admission of connections that have not yet authenticated: a deadline for the whole
 * handshake, bounds on pending handshakes per source and in all, slots for the work that
 * follows authentication ({@link dev.ferry.transport.admission.HandshakeGate}), and a
 * rate-limited log with a reason for every connection dropped
 * ({@link dev.ferry.transport.admission.DropLog}). Every listening port that runs a handshake
 * goes through a gate, whatever the transport.
 */
package dev.ferry.transport.admission;
