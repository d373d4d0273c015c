package dev.ferry.rpc;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The methods the tests call, and the patterns they check bodies with. A request of
 * {@link #SIZED} or {@link #RECORD} is: seed (8 bytes), response size (4 bytes), then the
 * pattern of the seed; the response is the pattern of {@code ~seed} of that size.
 */
public final class TestService {

    /** Echo of the pattern, idempotent. */
    public static final RpcMethod SIZED = RpcMethod.idempotent(1);
    /** Same as {@link #SIZED} but non-idempotent; counts its runs per (client id, call id). */
    public static final RpcMethod RECORD = RpcMethod.atMostOnce(2);
    /** Throws an {@link IllegalStateException} with the seed in the message. */
    public static final RpcMethod FAIL = RpcMethod.idempotent(3);
    /** Sleeps the number of milliseconds in the request (less if cancelled or past the deadline), then answers. */
    public static final RpcMethod SLEEP = RpcMethod.idempotent(4);
    /** {@link #SIZED}, inline on the progress thread. */
    public static final RpcMethod INLINE = RpcMethod.idempotent(5).inline();
    /** A method nobody serves. */
    public static final RpcMethod MISSING = RpcMethod.idempotent(99);

    public static final int REQUEST_HEADER = 12;

    /** Runs of {@link #RECORD} per (client id, call id). */
    public final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
    /** Runs of {@link #SIZED}, {@link #INLINE} and {@link #RECORD} per call id, when {@link #countExecutions}. */
    public final Map<Long, AtomicInteger> executions = new ConcurrentHashMap<>();
    /** Whether to fill {@link #executions} (for tests with one client). */
    public volatile boolean countExecutions;
    public final AtomicLong cancelledSeen = new AtomicLong();
    /** Called with the seed of each run of {@link #RECORD}, before it answers. */
    public volatile java.util.function.LongConsumer onRecord = seed -> { };

    /** Registers every method on {@code server}. */
    public RpcServer register(RpcServer server) {
        server.register(SIZED, call -> {
            countExecution(call);
            answer(call);
        });
        server.register(INLINE, call -> {
            countExecution(call);
            answer(call);
        });
        server.register(RECORD, call -> {
            countExecution(call);
            runs.computeIfAbsent(call.clientId() + ":" + call.callId(), k -> new AtomicInteger()).incrementAndGet();
            onRecord.accept(call.request().get(LONG, 0));
            answer(call);
        });
        server.register(FAIL, call -> {
            throw new IllegalStateException("boom " + call.request().get(LONG, 0));
        });
        server.register(SLEEP, call -> {
            long millis = call.request().get(LONG, 0);
            long end = System.nanoTime() + millis * 1_000_000;
            while (System.nanoTime() < end) {
                if (call.isCancelled()) {
                    cancelledSeen.incrementAndGet();
                    break;
                }
                if (call.remainingMillis() < -100) {
                    break; // nobody waits any more
                }
                Thread.sleep(5);
            }
            call.reply(8).set(LONG, 0, millis);
        });
        return server;
    }

    private void countExecution(ServerCall call) {
        if (countExecutions) {
            executions.computeIfAbsent(call.callId(), k -> new AtomicInteger()).incrementAndGet();
        }
    }

    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;

    private static void answer(ServerCall call) {
        MemorySegment request = call.request();
        long seed = request.get(LONG, 0);
        int size = request.get(INT, 8);
        String problem = check(request.asSlice(REQUEST_HEADER), seed);
        if (problem != null) {
            throw new IllegalArgumentException("request corrupt: " + problem);
        }
        fill(call.reply(size), ~seed);
    }

    /** A writer of a request with {@code seed}, {@code requestSize} bytes, asking {@code responseSize}. */
    public static RequestWriter request(long seed, int responseSize) {
        return body -> {
            body.set(LONG, 0, seed);
            body.set(INT, 8, responseSize);
            fill(body.asSlice(REQUEST_HEADER), seed);
        };
    }

    /** Null if {@code response} is the answer to a request with {@code seed} asking {@code size} bytes. */
    public static String checkResponse(RpcResponse response, long seed, int size) {
        MemorySegment body = response.segment();
        if (body.byteSize() != size) {
            return "response of " + body.byteSize() + " bytes, expected " + size;
        }
        return check(body, ~seed);
    }

    static long mix(long a, long b) {
        long z = a * 0x9E3779B97F4A7C15L + b * 0xC2B2AE3D27D4EB4FL;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    static void fill(MemorySegment segment, long seed) {
        long size = segment.byteSize();
        long words = size / 8;
        for (long k = 0; k < words; k++) {
            segment.set(LONG, k * 8, mix(seed, k));
        }
        long last = mix(seed, words);
        for (long i = words * 8; i < size; i++) {
            segment.set(ValueLayout.JAVA_BYTE, i, (byte) (last >>> (8 * (i - words * 8))));
        }
    }

    static String check(MemorySegment segment, long seed) {
        long size = segment.byteSize();
        long words = size / 8;
        for (long k = 0; k < words; k++) {
            if (segment.get(LONG, k * 8) != mix(seed, k)) {
                return "wrong bytes at offset " + k * 8 + " of " + size;
            }
        }
        long last = mix(seed, words);
        for (long i = words * 8; i < size; i++) {
            if (segment.get(ValueLayout.JAVA_BYTE, i) != (byte) (last >>> (8 * (i - words * 8)))) {
                return "wrong byte at offset " + i + " of " + size;
            }
        }
        return null;
    }

    /** A size from 0 to {@code max}, uniform in log scale. */
    static int logUniform(long random, int max) {
        double u = (random >>> 11) * 0x1.0p-53;
        return (int) Math.min(max, Math.floor(Math.exp(u * Math.log(max + 1.0))) - 1);
    }
}
