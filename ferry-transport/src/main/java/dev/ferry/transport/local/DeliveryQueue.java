package dev.ferry.transport.local;

import java.util.concurrent.atomic.AtomicReference;

/**
 * A many-to-one intrusive queue of {@link Delivery} nodes (Vyukov's): producers swap the tail and
 * link the previous node, the one consumer follows the links. Unbounded as a structure; bounded
 * in use, since every queued message holds a receive credit of its link.
 */
final class DeliveryQueue {

    /** A node that carries nothing, the head before anything was queued. */
    private static final class Stub extends Delivery {
        @Override
        void dispatch(LocalTransport transport) {
            throw new AssertionError("the stub is never dispatched");
        }

        @Override
        void discard(LocalTransport transport) {
        }
    }

    private final AtomicReference<Delivery> tail;
    /** Owned by the consumer: the last node taken (or the stub). */
    private Delivery head;

    DeliveryQueue() {
        Delivery stub = new Stub();
        head = stub;
        tail = new AtomicReference<>(stub);
    }

    /** Any thread. A node is offered once. */
    void offer(Delivery delivery) {
        delivery.next = null;
        Delivery previous = tail.getAndSet(delivery);
        previous.next = delivery;
    }

    /** The consumer only: the oldest node, or null if none is linked yet. */
    Delivery poll() {
        Delivery next = head.next;
        if (next == null) {
            return null;
        }
        head.next = null;
        head = next;
        return next;
    }

    /** The consumer only: whether a node was offered, possibly not yet linked. */
    boolean maybeNonEmpty() {
        return head.next != null || tail.get() != head;
    }
}
