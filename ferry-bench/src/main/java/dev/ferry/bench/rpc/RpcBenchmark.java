package dev.ferry.bench.rpc;

import dev.ferry.bench.pingpong.ControlLine;
import dev.ferry.bench.pingpong.PingPong;
import dev.ferry.ps.net.ChildJvm;
import dev.ferry.rpc.RequestWriter;
import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcClient;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.rpc.RpcResponse;
import dev.ferry.transport.SharedSecret;
import java.io.PrintWriter;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;
import org.HdrHistogram.Histogram;

/**
 * The RPC benchmark's client: starts {@link RpcBenchServer} as a child process, connects, runs
 * {@code concurrency} callers (each with one call outstanding) untimed for the warm-up, then
 * timed for the duration, and stops the child whatever happens. A progress line goes out every
 * second.
 */
public final class RpcBenchmark {

    /** The server child's JVM: the GC the launcher uses, a modest heap. */
    private static final List<String> SERVER_JVM_OPTIONS = List.of("-XX:+UseParallelGC", "-Xms64m", "-Xmx1g");
    private static final long HIGHEST_NANOS = TimeUnit.SECONDS.toNanos(60);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final int WARMUP = 0;
    private static final int TIMED = 1;
    private static final int STOP = 2;

    private RpcBenchmark() {
    }

    /**
     * Runs {@code spec}, writing progress lines to {@code progress}.
     *
     * @throws RuntimeException with a one-line message if the transport is missing, the server
     *     fails or a call fails
     */
    public static RpcBenchResult run(RpcBenchSpec spec, PrintWriter progress) {
        byte[] key = new byte[32];
        new SecureRandom().nextBytes(key);
        List<String> command = ChildJvm.javaCommand(ChildJvm.serverJvmOptions(SERVER_JVM_OPTIONS), RpcBenchServer.class.getName(),
                RpcBenchServer.arguments(spec));
        try (ChildJvm server = ChildJvm.start(command, "rpc benchmark server")) {
            server.send(ControlLine.of(RpcBenchServer.SECRET, key));
            String address = ControlLine.argument(server.expect(ControlLine.ADDRESS, ChildJvm.startMillis(spec.timeoutMillis())));
            RpcBenchResult result = measure(spec, SharedSecret.of(key), address, server.pid(), progress);
            server.send(ControlLine.DONE);
            server.awaitExit(spec.timeoutMillis());
            return result;
        }
    }

    private static RpcBenchResult measure(RpcBenchSpec spec, SharedSecret secret, String address, long serverPid,
            PrintWriter progress) {
        RpcConfig config = RpcConfig.defaults().withSecret(secret).withDefaultDeadlineMillis(spec.timeoutMillis());
        try (RpcClient client = RpcClient.open(config, spec.transportConfig())) {
            RpcChannel channel = client.channel(address);
            if (!channel.awaitConnected(spec.timeoutMillis())) {
                Throwable why = channel.lastFailure();
                throw new IllegalStateException("no session to the server at " + address + " within "
                        + spec.timeoutMillis() + " ms" + (why == null ? "" : ": " + PingPong.message(why)));
            }
            Run run = new Run(spec, channel);
            run.start();
            try {
                run.warmUp(progress);
                long start = System.nanoTime();
                run.phase = TIMED;
                run.await(spec.label() + ": measuring", spec.durationMillis(), progress);
                run.phase = STOP;
                long end = System.nanoTime();
                Histogram all = run.join();
                return RpcBenchResult.of(spec, run.warmupCalls.sum(), all, (end - start) / 1e9, serverPid);
            } finally {
                run.phase = STOP;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted");
        }
    }

    /** The callers of one run. */
    private static final class Run {
        final RpcBenchSpec spec;
        final RpcChannel channel;
        final List<Thread> threads = new ArrayList<>();
        final List<Histogram> histograms = new ArrayList<>();
        final LongAdder calls = new LongAdder();
        final LongAdder warmupCalls = new LongAdder();
        final AtomicReference<RuntimeException> failure = new AtomicReference<>();
        volatile int phase = WARMUP;

        Run(RpcBenchSpec spec, RpcChannel channel) {
            this.spec = spec;
            this.channel = channel;
        }

        void start() {
            for (int c = 0; c < spec.concurrency(); c++) {
                Histogram histogram = new Histogram(HIGHEST_NANOS, 3);
                histograms.add(histogram);
                long first = (long) c << 40;
                threads.add(Thread.ofPlatform().name("ferry-rpc-bench-" + c).daemon()
                        .start(() -> call(histogram, first)));
            }
        }

        /** One caller: calls until told to stop, checking every response. */
        private void call(Histogram histogram, long first) {
            Echo echo = new Echo();
            echo.value = first;
            int size = spec.size();
            try {
                int now;
                while ((now = phase) != STOP && failure.get() == null) {
                    long value = ++echo.value;
                    long start = System.nanoTime();
                    try (RpcResponse response = channel.invoke(RpcBenchServer.ECHO, size, echo, spec.timeoutMillis())) {
                        MemorySegment body = response.segment();
                        if (body.byteSize() != size || size >= 8 && body.get(LONG, 0) != value) {
                            throw new IllegalStateException("wrong response to call " + value + ": " + body.byteSize()
                                    + " bytes");
                        }
                    }
                    long took = System.nanoTime() - start;
                    if (now == TIMED) {
                        histogram.recordValue(Math.min(took, HIGHEST_NANOS));
                    } else {
                        warmupCalls.increment();
                    }
                    calls.increment();
                }
            } catch (RuntimeException e) {
                failure.compareAndSet(null, e);
            }
        }

        /**
         * The warm-up: its time, then until its calls are made, for at most
         * {@link RpcBenchSpec#WARMUP_GRACE_MILLIS} more (a line says so if that ends it).
         */
        void warmUp(PrintWriter progress) throws InterruptedException {
            String label = spec.label() + ": warm-up";
            await(label, spec.warmupMillis(), progress);
            long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(RpcBenchSpec.WARMUP_GRACE_MILLIS);
            while (warmupCalls.sum() < spec.warmupCalls()) {
                if (System.nanoTime() >= end) {
                    progress.printf(Locale.ROOT, "%s: %d of %d calls %d s past its time; measuring now%n", label,
                            warmupCalls.sum(), spec.warmupCalls(), RpcBenchSpec.WARMUP_GRACE_MILLIS / 1_000);
                    progress.flush();
                    return;
                }
                await(label + " (" + warmupCalls.sum() + " of " + spec.warmupCalls() + " calls)", 1_000, progress);
            }
        }

        /** Waits {@code millis}, with a progress line a second; fails at once if a caller failed. */
        void await(String label, long millis, PrintWriter progress) throws InterruptedException {
            long start = System.nanoTime();
            long end = start + TimeUnit.MILLISECONDS.toNanos(millis);
            long lastCalls = calls.sum();
            long lastAt = start;
            for (long now = start; now < end; now = System.nanoTime()) {
                Thread.sleep(Math.max(1, Math.min(1_000, TimeUnit.NANOSECONDS.toMillis(end - now))));
                checkFailure();
                long t = System.nanoTime();
                if (t - lastAt >= 900_000_000L || t >= end) {
                    long c = calls.sum();
                    progress.printf(Locale.ROOT, "%s %.0f/%.0f s, %.0f calls/s%n", label, (t - start) / 1e9, millis / 1e3,
                            (c - lastCalls) / ((t - lastAt) / 1e9));
                    progress.flush();
                    lastCalls = c;
                    lastAt = t;
                }
            }
        }

        private void checkFailure() {
            RuntimeException e = failure.get();
            if (e != null) {
                phase = STOP;
                throw new IllegalStateException("a call failed: " + PingPong.message(e), e);
            }
        }

        /** Waits for the callers to finish their last call; their timed calls in one histogram. */
        Histogram join() throws InterruptedException {
            for (Thread thread : threads) {
                thread.join(spec.timeoutMillis() + 1_000);
            }
            checkFailure();
            Histogram all = new Histogram(HIGHEST_NANOS, 3);
            for (Histogram h : histograms) {
                all.add(h);
            }
            return all;
        }
    }

    /** Writes the request: its value first (when it fits), the rest left as the buffer has it. */
    private static final class Echo implements RequestWriter {
        long value;

        @Override
        public void write(MemorySegment body) {
            if (body.byteSize() >= 8) {
                body.set(LONG, 0, value);
            }
        }
    }
}
