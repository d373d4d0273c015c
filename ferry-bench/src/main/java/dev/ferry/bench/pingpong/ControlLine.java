package dev.ferry.bench.pingpong;

import java.util.Base64;

/**
 * The line protocol between the ping-pong client and its server child, over the child's
 * standard input and output. One line per message, a keyword and an optional argument:
 *
 * <pre>
 *   server -&gt; client   ADDRESS &lt;base64&gt;   the server's fabric address (or host:port for Netty)
 *   client -&gt; server   PEER &lt;base64&gt;      the client's address (RDM endpoints need both)
 *   server -&gt; client   READY              receives are posted: the client may send
 *   client -&gt; server   TIMED              warm-up is over: count allocations from here
 *   client -&gt; server   DONE               the client has every reply: tear down and exit
 *   server -&gt; client   STATS &lt;bytes&gt;      bytes the server thread allocated per timed round trip
 *   server -&gt; client   ERROR &lt;message&gt;    the server failed; it exits with status 1
 * </pre>
 *
 * Standard error is left to diagnostics; end of input tells the server that the client is gone.
 */
public final class ControlLine {

    /** The server's address. */
    public static final String ADDRESS = "ADDRESS";
    /** The client's address. */
    public static final String PEER = "PEER";
    /** The server is ready for the first message. */
    public static final String READY = "READY";
    /** The client's warm-up is over. */
    public static final String TIMED = "TIMED";
    /** The client is finished. */
    public static final String DONE = "DONE";
    /** The server's allocation figure. */
    public static final String STATS = "STATS";
    /** The server failed. */
    public static final String ERROR = "ERROR";

    private ControlLine() {
    }

    /** {@code keyword} followed by {@code bytes} in base64. */
    public static String of(String keyword, byte[] bytes) {
        return keyword + " " + Base64.getEncoder().encodeToString(bytes);
    }

    /** The argument of {@code line} after its keyword, or empty. */
    public static String argument(String line) {
        int space = line.indexOf(' ');
        return space < 0 ? "" : line.substring(space + 1);
    }

    /** The argument of {@code line} decoded from base64. */
    public static byte[] bytes(String line) {
        return Base64.getDecoder().decode(argument(line));
    }

    /** Whether {@code line} starts with {@code keyword}. */
    public static boolean is(String line, String keyword) {
        return line.equals(keyword) || line.startsWith(keyword + " ");
    }

    /** {@code message} on one line, for {@link #ERROR}. */
    public static String oneLine(String message) {
        return message == null ? "" : message.replace('\n', ' ').replace('\r', ' ');
    }
}
