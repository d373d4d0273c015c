package dev.ferry.transport.fabric;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A bounded queue that any number of threads offer to and one thread polls, on an array and
 * allocation-free: the algorithm of Agrona's {@code ManyToOneConcurrentArrayQueue}, on
 * VarHandles so that no JVM flag is needed. Producers claim a position by advancing the tail,
 * then publish the element into it; the consumer takes the element at the head once it is
 * published and clears it, which frees the position.
 */
final class ManyToOneArrayQueue<E> {

    private static final VarHandle HEAD;
    private static final VarHandle TAIL;
    private static final VarHandle ELEMENTS = MethodHandles.arrayElementVarHandle(Object[].class);

    static {
        try {
            MethodHandles.Lookup lookup = MethodHandles.lookup();
            HEAD = lookup.findVarHandle(ManyToOneArrayQueue.class, "head", long.class);
            TAIL = lookup.findVarHandle(ManyToOneArrayQueue.class, "tail", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final Object[] elements;
    private final int mask;
    /** Next position to publish; advanced by producers. */
    private volatile long tail;
    /** A recent {@link #head}, so that producers seldom read the consumer's line. */
    private volatile long headCache;
    /** Next position to take; written by the consumer only. */
    private volatile long head;

    /** A queue of {@code capacity} elements, a power of two. */
    ManyToOneArrayQueue(int capacity) {
        if (Integer.bitCount(capacity) != 1) {
            throw new IllegalArgumentException("capacity must be a power of two: " + capacity);
        }
        this.elements = new Object[capacity];
        this.mask = capacity - 1;
    }

    /** Adds {@code element}; false if the queue is full. Any thread. */
    boolean offer(E element) {
        long limit = headCache + elements.length;
        long position;
        do {
            position = (long) TAIL.getVolatile(this);
            if (position >= limit) {
                long h = (long) HEAD.getVolatile(this);
                limit = h + elements.length;
                if (position >= limit) {
                    return false;
                }
                headCache = h;
            }
        } while (!TAIL.compareAndSet(this, position, position + 1));
        ELEMENTS.setRelease(elements, (int) position & mask, element);
        return true;
    }

    /** Takes the oldest published element, or null. The consumer thread only. */
    @SuppressWarnings("unchecked")
    E poll() {
        long position = head;
        int index = (int) position & mask;
        Object element = ELEMENTS.getAcquire(elements, index);
        if (element == null) {
            return null;
        }
        ELEMENTS.setOpaque(elements, index, null);
        HEAD.setRelease(this, position + 1);
        return (E) element;
    }

    /** Whether no position is claimed and untaken; a snapshot from any thread. */
    boolean isEmpty() {
        return head == tail;
    }
}
