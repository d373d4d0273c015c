package dev.ferry.transport.fabric;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * The fabric transport's running totals: written by the progress thread (and, for
 * {@link #held}, by the threads that release messages), read by any thread through
 * {@link FabricTransport#counters()}.
 */
final class FabricCounters {

    final LongAdder messagesSent = new LongAdder();
    final LongAdder messagesReceived = new LongAdder();
    final LongAdder bytesSent = new LongAdder();
    final LongAdder bytesReceived = new LongAdder();
    final LongAdder eagerSent = new LongAdder();
    final LongAdder rendezvousSent = new LongAdder();
    /** Of {@link #rendezvousSent}, those sent by reference to a peer that maps this side's send slabs. */
    final LongAdder sharedSent = new LongAdder();
    /** RELEASES frames sent: releases of messages by reference that no eager frame carried. */
    final LongAdder releaseFramesSent = new LongAdder();
    final LongAdder creditStalls = new LongAdder();
    final LongAdder windowStalls = new LongAdder();
    final LongAdder reposts = new LongAdder();
    /** Receive buffers the application holds now. */
    final AtomicLong held = new AtomicLong();
    final LongAdder linkFailures = new LongAdder();
    final LongAdder creditsGranted = new LongAdder();
    final LongAdder creditsReclaimed = new LongAdder();
    /** Credit-only frames sent (credits that found no other frame to ride on). */
    final LongAdder creditFramesSent = new LongAdder();
    /** Frames dropped because their token was not their link's (see {@link FrameDescriptor}). */
    final LongAdder forgedFrames = new LongAdder();
    /**
     * Completions (or error completions) for no operation in flight: a provider that completed
     * one twice (see {@link LinkTeardown}). Ignored, the errors among them logged.
     */
    final LongAdder strayCompletions = new LongAdder();
    /**
     * Receives that completed with fewer bytes than a frame header: a peer's garbage, or empty
     * completions of a provider that lost track of its entries.
     */
    final LongAdder truncatedFrames = new LongAdder();
}
