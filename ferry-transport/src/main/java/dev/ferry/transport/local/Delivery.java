package dev.ferry.transport.local;

/**
 * Something a transport's dispatch thread hands to its handler: a message, or the news that a
 * peer closed. Deliveries are the nodes of {@link DeliveryQueue} themselves, so queueing one
 * allocates nothing.
 */
abstract class Delivery {

    /** The next node in the queue; written by the producer that linked it, read by the consumer. */
    volatile Delivery next;

    /** Runs on the receiving transport's dispatch thread. */
    abstract void dispatch(LocalTransport transport);

    /** The transport closed before this could be dispatched: give back what it holds. */
    abstract void discard(LocalTransport transport);
}
