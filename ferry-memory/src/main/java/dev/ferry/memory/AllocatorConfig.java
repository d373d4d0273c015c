package dev.ferry.memory;

import java.util.Objects;
import java.util.function.Consumer;

/**
 * Every tunable of a {@link RegisteredAllocator}, with its default and the reason for it.
 *
 * @param slabBytes                size of one registered slab; a power of two, at least the
 *                                 largest run ({@code max(1 MiB, maxClassBytes)}). Default
 *                                 16 MiB: few registrations (NIC translation caches stay warm),
 *                                 and a multiple of the 2 MiB huge page
 * @param maxClassBytes            the largest size class; a power of two from 64 B. Larger
 *                                 requests get their own registration through the
 *                                 {@link RegistrationCache}. Default 1 MiB: above that,
 *                                 registering per buffer costs little next to moving the bytes
 * @param sendQuota                bytes of {@link PoolKind#SEND} memory (slabs plus large
 *                                 buffers in use). Default 128 MiB
 * @param receiveQuota             bytes of {@link PoolKind#RECEIVE} memory. Default 128 MiB
 * @param rendezvousQuota          bytes of {@link PoolKind#RENDEZVOUS} memory. Default 512 MiB:
 *                                 rendezvous buffers are the large ones
 * @param threadCacheBytesPerClass bytes a thread may keep cached per pool and size class.
 *                                 Default 256 KiB: a burst of eager sends is served without a
 *                                 lock, and memory parked in idle threads stays small next to the
 *                                 quotas
 * @param threadCacheMaxBuffers    buffers a thread may keep cached per pool and size class
 *                                 (0 disables thread caches). Default 256
 * @param registrationCacheBytes   bytes of idle registrations the registration cache keeps.
 *                                 Default 256 MiB
 * @param registrationCacheEntries idle registrations the registration cache keeps. Default 64:
 *                                 NICs hold a bounded number of memory regions cheaply
 * @param leakDetection            see {@link LeakDetection}. Default {@code SAMPLED}
 * @param leakSampleInterval       one allocation in this many records its call stack under
 *                                 {@code SAMPLED}. Default 4096: well under a byte per
 *                                 allocation on average
 * @param leakListener             receives leak reports. Default: a warning on the
 *                                 {@code dev.ferry.memory} system logger
 * @param shareSendPool            whether the send pool's slabs are {@link SharedMemory} that
 *                                 peers on this host may map ({@link RegisteredAllocator#sharedName}).
 *                                 Default false
 */
public record AllocatorConfig(
        long slabBytes,
        int maxClassBytes,
        long sendQuota,
        long receiveQuota,
        long rendezvousQuota,
        int threadCacheBytesPerClass,
        int threadCacheMaxBuffers,
        long registrationCacheBytes,
        int registrationCacheEntries,
        LeakDetection leakDetection,
        int leakSampleInterval,
        Consumer<LeakReport> leakListener,
        boolean shareSendPool) {

    private static final long MIB = 1L << 20;

    /** Logs each leak as a warning. */
    public static final Consumer<LeakReport> LOG_LEAKS = report -> System.getLogger("dev.ferry.memory")
            .log(System.Logger.Level.WARNING, report.describe());

    /** Checks the values. */
    public AllocatorConfig {
        Objects.requireNonNull(leakDetection, "leakDetection");
        Objects.requireNonNull(leakListener, "leakListener");
        if (maxClassBytes < SizeClasses.MIN_CLASS || Integer.bitCount(maxClassBytes) != 1) {
            throw new IllegalArgumentException("maxClassBytes must be a power of two >= 64: " + maxClassBytes);
        }
        long largestRun = SizeClasses.runBytes(maxClassBytes);
        if (Long.bitCount(slabBytes) != 1 || slabBytes < largestRun) {
            throw new IllegalArgumentException("slabBytes must be a power of two >= " + largestRun + ": " + slabBytes);
        }
        if (sendQuota < 0 || receiveQuota < 0 || rendezvousQuota < 0) {
            throw new IllegalArgumentException("quotas must be >= 0");
        }
        if (threadCacheBytesPerClass < 0 || threadCacheMaxBuffers < 0) {
            throw new IllegalArgumentException("thread cache sizes must be >= 0");
        }
        if (registrationCacheBytes < 0 || registrationCacheEntries < 0) {
            throw new IllegalArgumentException("registration cache caps must be >= 0");
        }
        if (leakSampleInterval < 1) {
            throw new IllegalArgumentException("leakSampleInterval must be >= 1: " + leakSampleInterval);
        }
    }

    /** The defaults described on each component. */
    public static AllocatorConfig defaults() {
        return new AllocatorConfig(16 * MIB, (int) MIB, 128 * MIB, 128 * MIB, 512 * MIB,
                256 * 1024, 256, 256 * MIB, 64, LeakDetection.SAMPLED, 4096, LOG_LEAKS, false);
    }

    /** The quota of {@code pool} in bytes. */
    public long quota(PoolKind pool) {
        return switch (pool) {
            case SEND -> sendQuota;
            case RECEIVE -> receiveQuota;
            case RENDEZVOUS -> rendezvousQuota;
        };
    }

    /** This configuration with another slab size. */
    public AllocatorConfig withSlabBytes(long bytes) {
        return new AllocatorConfig(bytes, maxClassBytes, sendQuota, receiveQuota, rendezvousQuota,
                threadCacheBytesPerClass, threadCacheMaxBuffers, registrationCacheBytes,
                registrationCacheEntries, leakDetection, leakSampleInterval, leakListener, shareSendPool);
    }

    /** This configuration with another largest size class. */
    public AllocatorConfig withMaxClassBytes(int bytes) {
        return new AllocatorConfig(slabBytes, bytes, sendQuota, receiveQuota, rendezvousQuota,
                threadCacheBytesPerClass, threadCacheMaxBuffers, registrationCacheBytes,
                registrationCacheEntries, leakDetection, leakSampleInterval, leakListener, shareSendPool);
    }

    /** This configuration with another quota for {@code pool}. */
    public AllocatorConfig withQuota(PoolKind pool, long bytes) {
        return new AllocatorConfig(slabBytes, maxClassBytes,
                pool == PoolKind.SEND ? bytes : sendQuota,
                pool == PoolKind.RECEIVE ? bytes : receiveQuota,
                pool == PoolKind.RENDEZVOUS ? bytes : rendezvousQuota,
                threadCacheBytesPerClass, threadCacheMaxBuffers, registrationCacheBytes,
                registrationCacheEntries, leakDetection, leakSampleInterval, leakListener, shareSendPool);
    }

    /** This configuration with other thread cache bounds. */
    public AllocatorConfig withThreadCache(int bytesPerClass, int maxBuffers) {
        return new AllocatorConfig(slabBytes, maxClassBytes, sendQuota, receiveQuota, rendezvousQuota,
                bytesPerClass, maxBuffers, registrationCacheBytes,
                registrationCacheEntries, leakDetection, leakSampleInterval, leakListener, shareSendPool);
    }

    /** This configuration with other registration cache caps. */
    public AllocatorConfig withRegistrationCache(long bytes, int entries) {
        return new AllocatorConfig(slabBytes, maxClassBytes, sendQuota, receiveQuota, rendezvousQuota,
                threadCacheBytesPerClass, threadCacheMaxBuffers, bytes,
                entries, leakDetection, leakSampleInterval, leakListener, shareSendPool);
    }

    /** This configuration with another leak detection level and listener. */
    public AllocatorConfig withLeakDetection(LeakDetection level, Consumer<LeakReport> listener) {
        return new AllocatorConfig(slabBytes, maxClassBytes, sendQuota, receiveQuota, rendezvousQuota,
                threadCacheBytesPerClass, threadCacheMaxBuffers, registrationCacheBytes,
                registrationCacheEntries, level, leakSampleInterval, listener, shareSendPool);
    }

    /** This configuration with the send pool's slabs shared with peers on this host, or not. */
    public AllocatorConfig withSharedSendPool(boolean shared) {
        return new AllocatorConfig(slabBytes, maxClassBytes, sendQuota, receiveQuota, rendezvousQuota,
                threadCacheBytesPerClass, threadCacheMaxBuffers, registrationCacheBytes,
                registrationCacheEntries, leakDetection, leakSampleInterval, leakListener, shared);
    }
}
