package dev.ferry.bench.pingpong;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * The server's end of the {@link ControlLine} protocol: lines out on standard output, lines in
 * from standard input on a daemon thread. {@code TIMED} raises the timed flag; {@code DONE} or the
 * end of input (the client is gone) raises the stop flag. The serving loop reads them between
 * messages.
 */
final class ControlChannel implements FabricPingPong.ServerControl {

    private final PrintStream out;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final CountDownLatch stop = new CountDownLatch(1);
    private volatile boolean stopped;
    private volatile boolean timed;

    ControlChannel(InputStream in, PrintStream out) {
        this.out = out;
        Thread reader = new Thread(() -> read(in), "ferry-control-in");
        reader.setDaemon(true);
        reader.start();
    }

    private void read(InputStream in) {
        try (BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
            for (String line = reader.readLine(); line != null; line = reader.readLine()) {
                if (ControlLine.is(line, ControlLine.DONE)) {
                    break;
                }
                if (ControlLine.is(line, ControlLine.TIMED)) {
                    timed = true;
                    continue;
                }
                lines.add(line);
            }
        } catch (IOException e) {
            // The client is gone: same as DONE.
        } finally {
            stopped = true;
            stop.countDown();
        }
    }

    /** Writes one line and flushes it. */
    void send(String line) {
        out.println(line);
        out.flush();
    }

    /** The next line starting with {@code keyword}, waiting up to {@code timeoutMillis}. */
    String expect(String keyword, long timeoutMillis) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        while (true) {
            long left = Math.max(1, Math.min(deadline - System.nanoTime(), TimeUnit.MILLISECONDS.toNanos(100)));
            String line = lines.poll(left, TimeUnit.NANOSECONDS);
            if (line != null && ControlLine.is(line, keyword)) {
                return line;
            }
            if (line == null && (stopped || System.nanoTime() >= deadline)) {
                throw new IllegalStateException("the client sent no " + keyword + " within " + timeoutMillis + " ms");
            }
        }
    }

    /** Blocks until the client is done or gone. */
    void awaitStop() throws InterruptedException {
        stop.await();
    }

    @Override
    public boolean stopped() {
        return stopped;
    }

    @Override
    public boolean timed() {
        return timed;
    }
}
