package dev.ferry.bench.pingpong;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import dev.ferry.ps.net.ChildJvm;

/**
 * libfabric's own C ping-pong, {@code fi_pingpong} from fabtests, run the same way as Ferry's:
 * server as a child process on a free control port, client here against 127.0.0.1, server stopped
 * by its PID afterwards. Its {@code usec/xfer} is half a round trip, so the round trip is twice it.
 */
public final class CPingPong {

    /** The tool's name on the PATH. */
    public static final String TOOL = "fi_pingpong";

    private CPingPong() {
    }

    /** Whether {@code fi_pingpong} is on the PATH. */
    public static boolean available() {
        for (String dir : System.getenv().getOrDefault("PATH", "").split(java.io.File.pathSeparator)) {
            if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, TOOL))) {
                return true;
            }
        }
        return false;
    }

    /**
     * Runs {@code fi_pingpong} for {@code spec}'s provider, endpoint, size and iteration count
     * (it has no warm-up option) and returns its mean round trip in microseconds.
     *
     * @throws IllegalStateException if the tool fails or prints no result
     */
    public static double meanRoundTripMicros(PingPongSpec spec) {
        if (spec.isNetty()) {
            throw new IllegalArgumentException("fi_pingpong measures libfabric providers, not netty");
        }
        List<String> common = List.of(TOOL, "-p", spec.provider(), "-e", spec.endpointName(),
                "-S", Integer.toString(spec.size()), "-I", Integer.toString(spec.iterations()));
        int port = freePort();
        List<String> serverCommand = new java.util.ArrayList<>(common);
        serverCommand.addAll(List.of("-B", Integer.toString(port)));
        try (ChildJvm server = ChildJvm.start(serverCommand, TOOL + " server")) {
            // fi_pingpong's client gives up at once if nothing listens yet: retry while the server starts.
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(spec.timeoutMillis());
            String output = "";
            while (System.nanoTime() < deadline && server.isAlive()) {
                List<String> clientCommand = new java.util.ArrayList<>(common);
                clientCommand.addAll(List.of("-P", Integer.toString(port), "127.0.0.1"));
                Process client = start(clientCommand);
                try {
                    output = new String(client.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                    if (client.waitFor(spec.timeoutMillis(), TimeUnit.MILLISECONDS) && client.exitValue() == 0) {
                        return 2 * usecPerTransfer(output, spec.size());
                    }
                } finally {
                    stop(client);
                }
                Thread.sleep(100);
            }
            throw new IllegalStateException(TOOL + " " + spec.label() + " failed: "
                    + ControlLine.oneLine(output.isBlank() ? "no output" : output.strip()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The {@code usec/xfer} column of the result row for {@code size} in fi_pingpong's output. */
    static double usecPerTransfer(String output, int size) {
        String[] header = null;
        for (String line : output.split("\n")) {
            String[] cells = line.trim().split("\\s+");
            if (cells.length > 0 && cells[0].equals("bytes")) {
                header = cells;
            } else if (header != null && cells.length == header.length && cells[0].equals(Integer.toString(size))) {
                for (int c = 0; c < header.length; c++) {
                    if (header[c].equals("usec/xfer")) {
                        return Double.parseDouble(cells[c]);
                    }
                }
            }
        }
        throw new IllegalStateException("no usec/xfer for " + size + " B in the output of " + TOOL + ": "
                + ControlLine.oneLine(output.strip()));
    }

    private static Process start(List<String> command) {
        try {
            return new ProcessBuilder(command).redirectErrorStream(true).start();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot run " + TOOL + " (package libfabric-bin)", e);
        }
    }

    private static void stop(Process process) {
        if (!process.isAlive()) {
            return;
        }
        process.destroy();
        try {
            if (!process.waitFor(2, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                process.waitFor(2, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
        }
    }

    private static int freePort() {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
