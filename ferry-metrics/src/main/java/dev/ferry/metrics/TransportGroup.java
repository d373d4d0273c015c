package dev.ferry.metrics;

import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.ToDoubleFunction;

import dev.ferry.memory.AllocatorStats;
import dev.ferry.memory.PoolKind;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportCounters;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;

/**
 * The meters of every transport of one provider and role in this process, summed: one series
 * per (provider, role) whatever the number of transports, so cardinality stays bounded. Meters
 * read a snapshot taken when scraped.
 */
final class TransportGroup {

    private static final long MAX_AGE_NANOS = 100_000_000L;

    private final List<Transport> transports = new CopyOnWriteArrayList<>();
    private final Snapshot<TransportCounters> counters = new Snapshot<>(this::sumCounters, MAX_AGE_NANOS);
    private final Snapshot<Optional<AllocatorStats>> memory = new Snapshot<>(this::sumMemory, MAX_AGE_NANOS);
    private boolean memoryBound;
    private final MeterRegistry registry;
    private final Tags tags;

    TransportGroup(MeterRegistry registry, String provider, String role) {
        this.registry = registry;
        this.tags = Tags.of("provider", provider, "role", role);
        gauge("ferry.transport.links.open", null, "Links (queue pairs, connections) open now", c -> c.linksOpen());
        counter("ferry.transport.messages.sent", null, "Messages whose send completed", c -> c.messagesSent());
        counter("ferry.transport.messages.received", null, "Messages delivered to the handler", c -> c.messagesReceived());
        counter("ferry.transport.sent", "bytes", "Payload bytes of the messages sent", c -> c.bytesSent());
        counter("ferry.transport.received", "bytes", "Payload bytes of the messages delivered", c -> c.bytesReceived());
        counter("ferry.transport.eager.sent", null, "Messages sent eagerly (one send each)", c -> c.eagerSent());
        counter("ferry.transport.rendezvous.sent", null, "Messages sent by rendezvous (pulled by the receiver)",
                c -> c.rendezvousSent());
        gauge("ferry.transport.credits.available", null, "Send credits held now, summed over links",
                c -> c.creditsAvailable());
        counter("ferry.transport.credit.stalls", null, "Times a link's sends began waiting for a receive credit",
                c -> c.creditStalls());
        counter("ferry.transport.window.stalls", null, "Times a link's sends began waiting for room in a send window",
                c -> c.windowStalls());
        gauge("ferry.transport.in.flight", "bytes", "Bytes sent or advertised and not yet completed",
                c -> c.bytesInFlight());
        gauge("ferry.transport.in.flight.peak", "bytes", "The most bytes in flight seen", c -> c.peakBytesInFlight());
        counter("ferry.transport.reposts", null, "Receive buffers reposted after the application released them",
                c -> c.reposts());
        gauge("ferry.transport.receive.buffers.held", null, "Receive buffers the application holds now",
                c -> c.receiveBuffersHeld());
        counter("ferry.transport.link.failures", null, "Links closed by an error or a bad frame", c -> c.linkFailures());
        counter("ferry.transport.credits.granted", null, "Receive credits granted to busy peers from a shared queue",
                c -> c.creditsGranted());
        counter("ferry.transport.credits.reclaimed", null, "Receive credits taken back from idle peers",
                c -> c.creditsReclaimed());
        counter("ferry.transport.authentication.failures", null, "Peers refused: they could not prove the secret",
                c -> c.authenticationFailures());
        counter("ferry.transport.credit.frames.sent", null, "Frames sent only to return receive credits",
                c -> c.creditFramesSent());
        Gauge.builder("ferry.transport.instances", transports, List::size).tags(tags)
                .description("Transports of this provider and role in the process").register(registry);
    }

    /** Adds {@code transport} (once); its allocator's meters appear with the first that has one. */
    synchronized void add(Transport transport) {
        if (transports.contains(transport)) {
            return;
        }
        transports.add(transport);
        if (!memoryBound && transport.allocatorStats().isPresent()) {
            memoryBound = true;
            bindMemory();
        }
    }

    synchronized void remove(Transport transport) {
        transports.remove(transport);
    }

    private void bindMemory() {
        mgauge("ferry.memory.registered", "bytes", "Bytes under live registrations (slabs and cached)",
                m -> m.registeredBytes());
        mgauge("ferry.memory.registrations", null, "Live registrations: slabs plus registration-cache entries",
                m -> m.registrations());
        mgauge("ferry.memory.slabs", null, "Registered slabs", m -> m.slabs());
        mcounter("ferry.memory.registration.cache.hits", "Large buffers served by a cached registration",
                m -> m.registrationCacheHits());
        mcounter("ferry.memory.registration.cache.misses", "Large buffers that had to register",
                m -> m.registrationCacheMisses());
        mcounter("ferry.memory.registration.cache.evictions", "Cached registrations closed to stay within the caps",
                m -> m.registrationCacheEvictions());
        mcounter("ferry.memory.thread.cache.hits", "Allocations served by the thread's own cache",
                m -> m.threadCacheHits());
        mcounter("ferry.memory.thread.cache.misses", "Allocations that went to the pool", m -> m.threadCacheMisses());
        mcounter("ferry.memory.leaks", "Leaked buffers reported", m -> m.leaks());
        for (PoolKind kind : PoolKind.values()) {
            Tags pool = tags.and("pool", kind.name().toLowerCase(java.util.Locale.ROOT));
            Gauge.builder("ferry.memory.pool.in.use", memory, s -> s.get().map(m -> (double) m.pool(kind).bytesInUse())
                    .orElse(Double.NaN)).tags(pool).baseUnit("bytes")
                    .description("Capacity of the pool's buffers handed out now").register(registry);
            Gauge.builder("ferry.memory.pool.buffers.in.use", memory, s -> s.get()
                    .map(m -> (double) m.pool(kind).buffersInUse()).orElse(Double.NaN)).tags(pool)
                    .description("The pool's buffers handed out now").register(registry);
            Gauge.builder("ferry.memory.pool.reserved", memory, s -> s.get()
                    .map(m -> (double) m.pool(kind).reservedBytes()).orElse(Double.NaN)).tags(pool).baseUnit("bytes")
                    .description("Bytes counted against the pool's quota").register(registry);
            Gauge.builder("ferry.memory.pool.quota", memory, s -> s.get().map(m -> (double) m.pool(kind).quota())
                    .orElse(Double.NaN)).tags(pool).baseUnit("bytes").description("The pool's quota")
                    .register(registry);
        }
    }

    private void counter(String name, String unit, String help, ToDoubleFunction<TransportCounters> f) {
        FunctionCounter.builder(name, counters, s -> f.applyAsDouble(s.get())).tags(tags).baseUnit(unit)
                .description(help).register(registry);
    }

    private void gauge(String name, String unit, String help, ToDoubleFunction<TransportCounters> f) {
        Gauge.builder(name, counters, s -> f.applyAsDouble(s.get())).tags(tags).baseUnit(unit).description(help)
                .register(registry);
    }

    private void mcounter(String name, String help, ToDoubleFunction<AllocatorStats> f) {
        FunctionCounter.builder(name, memory, s -> s.get().map(f::applyAsDouble).orElse(0.0)).tags(tags)
                .description(help).register(registry);
    }

    private void mgauge(String name, String unit, String help, ToDoubleFunction<AllocatorStats> f) {
        Gauge.builder(name, memory, s -> s.get().map(f::applyAsDouble).orElse(Double.NaN)).tags(tags).baseUnit(unit)
                .description(help).register(registry);
    }

    private TransportCounters sumCounters() {
        int links = 0;
        long[] v = new long[18];
        for (Transport t : transports) {
            TransportCounters c = t.counters();
            links += c.linksOpen();
            v[0] += c.messagesSent();
            v[1] += c.messagesReceived();
            v[2] += c.bytesSent();
            v[3] += c.bytesReceived();
            v[4] += c.eagerSent();
            v[5] += c.rendezvousSent();
            v[6] += c.creditsAvailable();
            v[7] += c.creditStalls();
            v[8] += c.windowStalls();
            v[9] += c.bytesInFlight();
            v[10] = Math.max(v[10], c.peakBytesInFlight());
            v[11] += c.reposts();
            v[12] += c.receiveBuffersHeld();
            v[13] += c.linkFailures();
            v[14] += c.creditsGranted();
            v[15] += c.creditsReclaimed();
            v[16] += c.authenticationFailures();
            v[17] += c.creditFramesSent();
        }
        return new TransportCounters(links, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11],
                v[12], v[13], v[14], v[15], v[16], v[17]);
    }

    /** The sum of the allocators' statistics, or empty if no transport has one. */
    private Optional<AllocatorStats> sumMemory() {
        AllocatorStats sum = null;
        for (Transport t : transports) {
            Optional<AllocatorStats> s = t.allocatorStats();
            if (s.isPresent()) {
                sum = sum == null ? s.get() : add(sum, s.get());
            }
        }
        return Optional.ofNullable(sum);
    }

    private static AllocatorStats add(AllocatorStats a, AllocatorStats b) {
        List<AllocatorStats.PoolStats> pools = new java.util.ArrayList<>();
        for (int i = 0; i < a.pools().size(); i++) {
            AllocatorStats.PoolStats p = a.pools().get(i);
            AllocatorStats.PoolStats q = b.pools().get(i);
            pools.add(new AllocatorStats.PoolStats(p.pool(), p.quota() + q.quota(), p.reservedBytes() + q.reservedBytes(),
                    p.bytesInUse() + q.bytesInUse(), p.buffersInUse() + q.buffersInUse(), p.slabs() + q.slabs()));
        }
        return new AllocatorStats(a.slabs() + b.slabs(), a.slabBytes() + b.slabBytes(),
                a.registrations() + b.registrations(), a.registeredBytes() + b.registeredBytes(),
                a.registrationCacheHits() + b.registrationCacheHits(),
                a.registrationCacheMisses() + b.registrationCacheMisses(),
                a.registrationCacheEvictions() + b.registrationCacheEvictions(),
                a.threadCacheHits() + b.threadCacheHits(), a.threadCacheMisses() + b.threadCacheMisses(),
                a.leaks() + b.leaks(), pools);
    }
}
