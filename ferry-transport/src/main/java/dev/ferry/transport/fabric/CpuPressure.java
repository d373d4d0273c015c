package dev.ferry.transport.fabric;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Whether this host has more runnable threads than cores, so that a progress thread that spins
 * or polls while idle takes a core from a thread with work. Sampled from the kernel's count of
 * runnable tasks (the fourth field of {@code /proc/loadavg}, {@code running/total}) on the
 * progress thread's timer, smoothed over the samples. Where there is no such file (not Linux),
 * or with {@code -Dferry.transport.spinUnderLoad=true}, it never reports pressure.
 *
 * <p>The count includes the sampling thread and its peers' spinning progress threads, so it
 * says "overcommitted" only when more than one thread beyond the cores is runnable: a
 * ping-pong pair spinning on an otherwise idle two-core host is not pressure.
 */
final class CpuPressure implements AutoCloseable {

    private static final Path LOADAVG = Path.of("/proc/loadavg");
    /** Samples weigh 1/4 in the average (in sixteenths of a thread). */
    private static final int SHIFT = 2;

    private final FileChannel channel;
    private final ByteBuffer buffer = ByteBuffer.allocateDirect(128);
    /** Runnable threads above which the host counts as overcommitted, in sixteenths. */
    private final int limit;
    /** Moving average of runnable threads, in sixteenths. */
    private int average;
    private boolean overcommitted;

    private CpuPressure(FileChannel channel, int cores) {
        this.channel = channel;
        this.limit = (cores + 1) << 4;
    }

    /** The host's gauge, or one that never reports pressure where it cannot be read or is switched off. */
    static CpuPressure open() {
        FileChannel channel = null;
        if (!Boolean.getBoolean("ferry.transport.spinUnderLoad")) {
            try {
                channel = FileChannel.open(LOADAVG, StandardOpenOption.READ);
            } catch (IOException | UnsupportedOperationException | SecurityException e) {
                channel = null;
            }
        }
        return new CpuPressure(channel, Runtime.getRuntime().availableProcessors());
    }

    /** Whether more threads were runnable than the cores (and one more) could run, lately. */
    boolean overcommitted() {
        return overcommitted;
    }

    /** Takes a sample: progress thread, on its timer. */
    void sample() {
        if (channel == null) {
            return;
        }
        int running = read();
        if (running < 0) {
            return;
        }
        average += ((running << 4) - average) >> SHIFT;
        overcommitted = average > limit;
    }

    /** The runnable count of {@code /proc/loadavg}, or -1. */
    private int read() {
        buffer.clear();
        try {
            if (channel.read(buffer, 0) <= 0) {
                return -1;
            }
        } catch (IOException e) {
            return -1;
        }
        return runnable(buffer, buffer.position());
    }

    /**
     * The runnable count in the first {@code length} bytes of a {@code /proc/loadavg} line
     * ("0.52 0.58 0.59 3/1234 5678" says 3), or -1 if they are not one.
     */
    static int runnable(ByteBuffer line, int length) {
        int fields = 0;
        int value = -1;
        for (int i = 0; i < length; i++) {
            byte b = line.get(i);
            if (b == ' ') {
                fields++;
            } else if (fields == 3) {
                if (b == '/') {
                    return value;
                }
                if (b < '0' || b > '9' || value > 1_000_000) {
                    return -1;
                }
                value = (value < 0 ? 0 : value * 10) + (b - '0');
            }
        }
        return -1;
    }

    @Override
    public void close() {
        if (channel != null) {
            try {
                channel.close();
            } catch (IOException e) {
                // closing anyway
            }
        }
    }
}
