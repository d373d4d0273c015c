package dev.ferry.bench.ps;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;

/**
 * One client process of a benchmark (a child of the driver): one {@link PsBenchClient} shared by
 * {@code threads} threads.
 *
 * <p>It starts with the servers and waits for their addresses, {@code SERVERS a,b}, then
 * connects and prints {@code READY}. {@code fetch}: on {@code RUN} the threads pull batches (closed loop with {@code concurrency}
 * requests outstanding per thread, or open loop at {@code rate} requests per second for the
 * process, latency counted from each request's intended send time). {@code MEASURE} starts the
 * measured interval, {@code STOP} ends it and prints {@code RESULT ...}. In the closed loop the
 * measured interval may come in slices ({@code bench fetch --interleave}): {@code PAUSE} ends a
 * slice, lets every thread finish its fetch and stop, and prints {@code PAUSED}; {@code RESUME}
 * sets them going unmeasured and the next {@code MEASURE} starts the next slice, the fetches,
 * latencies and time of the slices adding up. A fetch counts in the slice it started in.
 *
 * <p>{@code push}: the threads push one gradient batch per step. Before each step the process
 * prints {@code STEP <n>} once all its threads are at the barrier, and waits for
 * {@code GO warm|measure|stop} from the driver, which releases every process together: a
 * barrier across processes, so that all workers' pushes hit the servers at once (incast).
 *
 * <p>While measuring it prints {@code PROGRESS <operations> <nanos since measuring began>} every
 * {@link ProgressRate#REPORT_MILLIS}.
 */
public final class PsBenchWorker {

    private static final long HIGHEST_NANOS = TimeUnit.SECONDS.toNanos(60);
    private static final long CALL_TIMEOUT_SECONDS = 60;

    private final Args args;
    private static final java.lang.management.ThreadMXBean THREADS = java.lang.management.ManagementFactory.getThreadMXBean();

    private final PsBenchClient client;
    /** Closed loops time an operation by the thread's CPU time ({@link PsBenchClient#onCallingThread}), else by the wall clock. */
    private final boolean cpuClock;
    /** The servers of an in-process run (direct, local), else null. */
    private final InProcessServers servers;
    private final int dimension;
    private final int threads;
    private final BlockingQueue<String> commands = new LinkedBlockingQueue<>();
    private final Recorder recorder = new Recorder(HIGHEST_NANOS, 3);
    private final LongAdder operations = new LongAdder();
    private final LongAdder keys = new LongAdder();
    private final LongAdder errors = new LongAdder();
    private final AtomicReference<Throwable> firstError = new AtomicReference<>();
    private volatile int phase = WARM;
    private volatile long measureStartNanos;
    /** The client transport's received bytes when measuring started and stopped (answers' bytes on the wire). */
    private volatile long bytesAtStart;
    private volatile long bytesAtEnd;
    /** The measured slices' time before the current one; set by the command thread. */
    private volatile long measuredNanos;
    /** Where the closed loop's threads wait while the run is paused. */
    private final PauseGate gate = new PauseGate();

    private static final int WARM = 0;
    private static final int MEASURE = 1;
    private static final int STOP = 2;

    private PsBenchWorker(Args args, PsBenchClient client, InProcessServers servers) {
        this.args = args;
        this.client = client;
        this.cpuClock = client.onCallingThread() && THREADS.isCurrentThreadCpuTimeSupported();
        this.servers = servers;
        this.dimension = args.integer("dimension");
        this.threads = args.integer("threads");
    }

    /**
     * Arguments {@code key=value}: workload ({@code fetch} or {@code push}), transport, dimension, threads, ids, alpha (0: uniform), batchMin,
     * batchMax, concurrency, rate (0: closed loop), seed, flowControl, psTuning; for the in-process
     * transports ({@code direct}, {@code local}, whose servers run in this JVM) also servers,
     * serverThreads, optimizer and inlinePulls.
     */
    public static void main(String[] argv) {
        try {
            Args args = Args.parse(argv);
            BenchTransport transport = BenchTransport.parse(args.string("transport"));
            // The driver starts this JVM while the servers start, and sends their addresses.
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String first = in.readLine();
            if (first == null || !first.startsWith("SERVERS ")) {
                throw new IllegalStateException("expected SERVERS <addresses>, got " + first);
            }
            List<String> servers = Arrays.asList(first.substring("SERVERS ".length()).trim().split(","));
            InProcessServers local = transport.inProcess()
                    ? InProcessServers.start(args, args.integer("servers"), transport == BenchTransport.LOCAL) : null;
            try {
                if (local != null) {
                    servers = local.addresses();
                }
                PsBenchClient client = transport == BenchTransport.DIRECT
                        ? new DirectPsClient(local.parameterServers())
                        : transport.ferry()
                                ? new FerryPsClient(BenchTransport.rpc(2), transport.config(args.bool("flowControl"),
                                        args.string("bindHost"), args.bool("psTuning")), servers,
                                        dev.ferry.ps.PullFormat.parse(args.has("pullFormat") ? args.string("pullFormat") : "f32"))
                                : new GrpcPsClient(servers);
                BenchMetrics.Endpoint metrics = BenchMetrics.serve(args.integer("metricsPort"), client::bindMetrics);
                try (client) {
                    new PsBenchWorker(args, client, local).run(in);
                } finally {
                    metrics.close();
                }
            } finally {
                if (local != null) {
                    local.close();
                }
            }
            System.exit(0);
        } catch (Throwable t) {
            System.out.println("ERROR " + t.toString().replace('\n', ' '));
            System.out.flush();
            t.printStackTrace();
            System.exit(1);
        }
    }

    private void run(BufferedReader in) throws Exception {
        // One pull per server before READY: connections up, the first call's costs paid.
        long[] probe = new long[64];
        for (int i = 0; i < probe.length; i++) {
            probe[i] = i;
        }
        client.pull(PsBenchServer.TABLE, dimension, probe, probe.length, new float[probe.length * dimension])
                .get(30, TimeUnit.SECONDS);
        Thread reader = Thread.ofPlatform().daemon().name("ferry-bench-commands").start(() -> readCommands(in));
        System.out.println("READY");
        System.out.flush();
        String first = commands.take();
        if (!first.equals("RUN")) {
            throw new IllegalStateException("expected RUN, got " + first);
        }
        Thread progress = Thread.ofPlatform().daemon().name("ferry-bench-progress").start(this::reportProgress);
        if (args.string("workload").equals("push")) {
            runPush();
        } else {
            runFetch();
        }
        progress.interrupt();
        Histogram latency = recorder.getIntervalHistogram();
        double seconds = measuredNanos / 1e9;
        StringBuilder line = new StringBuilder("RESULT");
        line.append(" hist=").append(encode(latency));
        line.append(" ops=").append(operations.sum());
        line.append(" keys=").append(keys.sum());
        line.append(" errors=").append(errors.sum());
        line.append(" seconds=").append(seconds);
        line.append(" c.measured_rx_bytes=").append(bytesAtEnd - bytesAtStart);
        for (Map.Entry<String, Long> e : client.counters().entrySet()) {
            line.append(" c.").append(e.getKey()).append('=').append(e.getValue());
        }
        if (servers != null) {
            for (Map.Entry<String, Long> e : servers.counters().entrySet()) {
                line.append(" c.").append(e.getKey()).append('=').append(e.getValue());
            }
        }
        System.out.println(line);
        System.out.flush();
        Throwable error = firstError.get();
        if (error != null) {
            System.err.println("first error of " + errors.sum() + ": " + error);
        }
        reader.join(TimeUnit.SECONDS.toMillis(30));
    }

    private void readCommands(BufferedReader in) {
        try (in) {
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                commands.add(line.trim());
            }
        } catch (java.io.IOException e) {
            // end of input
        } finally {
            commands.add("EOF");
        }
    }

    private void reportProgress() {
        try {
            while (true) {
                Thread.sleep(ProgressRate.REPORT_MILLIS);
                if (phase == MEASURE) {
                    long since = measuredNanos + System.nanoTime() - measureStartNanos;
                    System.out.println("PROGRESS " + operations.sum() + " " + since);
                    System.out.flush();
                }
            }
        } catch (InterruptedException e) {
            // done
        }
    }

    private void startMeasuring() {
        if (servers != null) {
            servers.resetPeaks();
        }
        recorder.reset();
        operations.reset();
        keys.reset();
        errors.reset();
        measuredNanos = 0;
        bytesAtStart = client.counters().getOrDefault("client_bytes_received", 0L);
        measureStartNanos = System.nanoTime();
        phase = MEASURE;
    }

    /** The next slice of the measured interval (the first one starts it). */
    private void measureSlice(boolean first) {
        if (first) {
            startMeasuring();
        } else {
            measureStartNanos = System.nanoTime();
            phase = MEASURE;
        }
    }

    /** Ends the current slice, if one is under way: its time joins the measured interval's. */
    private void endSlice() {
        if (phase == MEASURE) {
            measuredNanos += System.nanoTime() - measureStartNanos;
        }
    }

    private void stopMeasuring() {
        endSlice();
        bytesAtEnd = client.counters().getOrDefault("client_bytes_received", 0L);
        phase = STOP;
        gate.open();
    }

    /** On the command thread: stops the fetch threads at the gate and says so once they all wait there. */
    private void pause(List<Thread> running) throws InterruptedException {
        endSlice();
        phase = WARM;
        gate.pause(running);
        System.out.println("PAUSED");
        System.out.flush();
    }

    private void fail(Throwable t) {
        errors.increment();
        firstError.compareAndSet(null, t);
    }

    // ------------------------------------------------------------------------------------------
    // fetch

    private void runFetch() throws InterruptedException {
        int concurrency = args.integer("concurrency");
        double rate = args.decimal("rate");
        List<Thread> running = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int index = t;
            running.add(Thread.ofPlatform().name("ferry-fetch-" + t).start(() -> fetchLoop(index, concurrency, rate)));
        }
        boolean measured = false;
        while (true) {
            String command = commands.take();
            switch (command) {
                case "MEASURE" -> {
                    measureSlice(!measured);
                    measured = true;
                }
                case "PAUSE" -> {
                    if (concurrency != 1 || rate > 0) {
                        throw new IllegalStateException("only the closed loop of one fetch per thread pauses");
                    }
                    pause(running);
                }
                case "RESUME" -> gate.open();
                case "STOP", "EOF" -> stopMeasuring();
                default -> throw new IllegalStateException("unknown command " + command);
            }
            if (phase == STOP) {
                break;
            }
        }
        for (Thread thread : running) {
            thread.join();
        }
    }

    private void fetchLoop(int index, int concurrency, double rate) {
        IdGenerator ids = generator(index);
        int maxBatch = args.integer("batchMax");
        if (concurrency == 1 && rate <= 0) {
            closedLoop(ids, maxBatch);
            return;
        }
        BlockingQueue<Slot> free = new ArrayBlockingQueue<>(concurrency);
        try {
            for (int i = 0; i < concurrency; i++) {
                free.add(new Slot(new long[maxBatch], new float[maxBatch * dimension]));
            }
            long interval = rate > 0 ? (long) (1e9 * threads / rate) : 0;
            long next = System.nanoTime() + (rate > 0 ? (long) (interval * ids.random().nextDouble()) : 0);
            while (phase != STOP) {
                long intended = 0;
                if (interval > 0) {
                    intended = next;
                    next += interval;
                    for (long wait = intended - System.nanoTime(); wait > 0 && phase != STOP;
                            wait = intended - System.nanoTime()) {
                        LockSupport.parkNanos(wait);
                    }
                }
                Slot slot = null;
                while (slot == null && phase != STOP) {
                    slot = free.poll(100, TimeUnit.MILLISECONDS);
                }
                if (slot == null) {
                    break;
                }
                int count = ids.batchSize();
                ids.fill(slot.ids, count);
                // Open loop: latency from the time the request should have gone, so that a slow
                // response delays no measurement (no coordinated omission).
                long from = interval > 0 ? intended : System.nanoTime();
                Slot taken = slot;
                try {
                    client.pull(PsBenchServer.TABLE, dimension, taken.ids, count, taken.out)
                            .whenComplete((v, e) -> {
                                complete(from, count, e);
                                free.add(taken);
                            });
                } catch (RuntimeException e) {
                    complete(from, count, e);
                    free.add(taken);
                }
            }
            // Let the requests in flight finish before their buffers go.
            for (int i = 0; i < concurrency; i++) {
                if (free.poll(CALL_TIMEOUT_SECONDS, TimeUnit.SECONDS) == null) {
                    break;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * The closed loop with one request outstanding per thread: each thread waits for its pull
     * itself ({@link PsBenchClient#pullAndWait}), so a client can copy the rows on it.
     */
    private void closedLoop(IdGenerator ids, int maxBatch) {
        long[] batch = new long[maxBatch];
        float[] out = new float[maxBatch * dimension];
        while (phase != STOP) {
            if (gate.paused()) {
                gate.await();
                continue;
            }
            int count = ids.batchSize();
            ids.fill(batch, count);
            boolean measured = phase == MEASURE;
            long from = closedLoopClock();
            Throwable error = null;
            try {
                client.pullAndWait(PsBenchServer.TABLE, dimension, batch, count, out);
            } catch (Exception e) {
                error = e;
            }
            complete(from, closedLoopClock(), count, error, measured);
        }
    }

    /** The calling thread's CPU time for a client whose work never leaves it, else the wall clock. */
    private long closedLoopClock() {
        return cpuClock ? THREADS.getCurrentThreadCpuTime() : System.nanoTime();
    }

    private void complete(long startNanos, int count, Throwable error) {
        complete(startNanos, System.nanoTime(), count, error);
    }

    private void complete(long startNanos, long endNanos, int count, Throwable error) {
        complete(startNanos, endNanos, count, error, phase == MEASURE);
    }

    /** Records an operation if {@code measured} (the closed loop: it started in a measured slice). */
    private void complete(long startNanos, long endNanos, int count, Throwable error, boolean measured) {
        long latency = endNanos - startNanos;
        if (error != null) {
            fail(error);
            return;
        }
        if (measured) {
            recorder.recordValue(Math.min(latency, HIGHEST_NANOS));
            operations.increment();
            keys.add(count);
        }
    }

    private record Slot(long[] ids, float[] out) {
    }

    // ------------------------------------------------------------------------------------------
    // push

    private void runPush() throws InterruptedException {
        int batch = args.integer("batchMax");
        int[] step = {0};
        CyclicBarrier barrier = new CyclicBarrier(threads, () -> {
            step[0]++;
            System.out.println("STEP " + step[0]);
            System.out.flush();
            try {
                String go = commands.take();
                switch (go) {
                    case "GO warm" -> phase = WARM;
                    case "GO measure" -> {
                        if (phase != MEASURE) {
                            startMeasuring();
                        }
                    }
                    default -> stopMeasuring();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                stopMeasuring();
            }
        });
        List<Thread> running = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int index = t;
            running.add(Thread.ofPlatform().name("ferry-push-" + t).start(() -> pushLoop(index, batch, barrier)));
        }
        for (Thread thread : running) {
            thread.join();
        }
    }

    private void pushLoop(int index, int batch, CyclicBarrier barrier) {
        IdGenerator ids = generator(index);
        long[] batchIds = new long[batch];
        try {
            float[] gradients = new float[batch * dimension];
            for (int i = 0; i < gradients.length; i++) {
                gradients[i] = (float) (ids.random().nextDouble() - 0.5) * 0.01f;
            }
            while (true) {
                barrier.await();
                if (phase == STOP) {
                    return;
                }
                ids.fill(batchIds, batch);
                long start = closedLoopClock();
                Throwable error = null;
                try {
                    client.push(PsBenchServer.TABLE, dimension, batchIds, batch, gradients)
                            .get(CALL_TIMEOUT_SECONDS, TimeUnit.SECONDS);
                } catch (java.util.concurrent.ExecutionException e) {
                    error = e.getCause();
                } catch (java.util.concurrent.TimeoutException | RuntimeException e) {
                    error = e;
                }
                complete(start, closedLoopClock(), batch, error);
            }
        } catch (InterruptedException | BrokenBarrierException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ------------------------------------------------------------------------------------------

    private IdGenerator generator(int thread) {
        long seed = args.longValue("seed") * 1_000_003L + thread;
        return new IdGenerator(seed, args.longValue("ids"), args.decimal("alpha"), args.integer("batchMin"),
                args.integer("batchMax"));
    }

    static String encode(Histogram histogram) {
        ByteBuffer buffer = ByteBuffer.allocate(histogram.getNeededByteBufferCapacity());
        int length = histogram.encodeIntoCompressedByteBuffer(buffer);
        return Base64.getEncoder().encodeToString(Arrays.copyOf(buffer.array(), length));
    }

    static Histogram decode(String text) {
        try {
            return Histogram.decodeFromCompressedByteBuffer(ByteBuffer.wrap(Base64.getDecoder().decode(text)), 0);
        } catch (java.util.zip.DataFormatException e) {
            throw new IllegalArgumentException("bad histogram", e);
        }
    }
}
