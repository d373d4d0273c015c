package dev.ferry.fabric;

/** libfabric's bit flags and enumerations, under their C names without the {@code FI_} prefix. */
public final class Fi {

    private Fi() {
    }

    // Capabilities and operation flags (fabric.h).
    public static final long MSG = 1L << 1;
    public static final long RMA = 1L << 2;
    public static final long TAGGED = 1L << 3;
    public static final long READ = 1L << 8;
    public static final long WRITE = 1L << 9;
    public static final long RECV = 1L << 10;
    public static final long SEND = 1L << 11;
    /** Bind flag for the transmit side of an endpoint to a completion queue; same bit as SEND. */
    public static final long TRANSMIT = SEND;
    public static final long REMOTE_READ = 1L << 12;
    public static final long REMOTE_WRITE = 1L << 13;
    public static final long MULTI_RECV = 1L << 16;
    public static final long REMOTE_CQ_DATA = 1L << 17;
    public static final long COMPLETION = 1L << 24;
    public static final long INJECT = 1L << 25;
    public static final long DELIVERY_COMPLETE = 1L << 28;
    public static final long SOURCE = 1L << 57;
    public static final long NUMERICHOST = 1L << 55;

    // Mode bits: what the provider asks of the application.
    public static final long CONTEXT = 1L << 59;
    public static final long CONTEXT2 = 1L << 52;
    public static final long RX_CQ_DATA = 1L << 56;

    // Memory registration modes (domain_attr.mr_mode).
    public static final int MR_LOCAL = 1 << 2;
    public static final int MR_RAW = 1 << 3;
    public static final int MR_VIRT_ADDR = 1 << 4;
    public static final int MR_ALLOCATED = 1 << 5;
    public static final int MR_PROV_KEY = 1 << 6;
    public static final int MR_MMU_NOTIFY = 1 << 7;
    public static final int MR_RMA_EVENT = 1 << 8;
    public static final int MR_ENDPOINT = 1 << 9;
    public static final int MR_HMEM = 1 << 10;

    /** The mr_mode bits Ferry handles: it passes descriptors, honours virtual or offset addressing,
     *  reads provider keys back, registers only allocated memory, and binds MRs to endpoints when asked. */
    public static final int MR_MODES_SUPPORTED =
            MR_LOCAL | MR_VIRT_ADDR | MR_ALLOCATED | MR_PROV_KEY | MR_ENDPOINT;

    /** An address that names no peer: for connected endpoints. */
    public static final long ADDR_UNSPEC = -1L;

    // Threading (domain_attr.threading).
    public static final int THREAD_UNSPEC = 0;
    public static final int THREAD_SAFE = 1;
    public static final int THREAD_DOMAIN = 3;

    // Progress models.
    public static final int PROGRESS_UNSPEC = 0;
    public static final int PROGRESS_AUTO = 1;
    public static final int PROGRESS_MANUAL = 2;

    // Address formats.
    public static final int FORMAT_UNSPEC = 0;
    public static final int SOCKADDR_IN = 2;
    public static final int SOCKADDR = 1;
    public static final int SOCKADDR_IN6 = 3;
    public static final int SOCKADDR_IB = 4;
    public static final int ADDR_STR = 9;

    /** The names of the bits set in {@code mrMode}, for messages. */
    public static String mrModeNames(int mrMode) {
        StringBuilder b = new StringBuilder();
        String[] names = {"", "", "MR_LOCAL", "MR_RAW", "MR_VIRT_ADDR", "MR_ALLOCATED", "MR_PROV_KEY",
            "MR_MMU_NOTIFY", "MR_RMA_EVENT", "MR_ENDPOINT", "MR_HMEM"};
        for (int bit = 0; bit < names.length; bit++) {
            if ((mrMode & (1 << bit)) != 0) {
                b.append(b.isEmpty() ? "" : "|").append(names[bit].isEmpty() ? "bit" + bit : names[bit]);
            }
        }
        return b.isEmpty() ? "none" : b.toString();
    }
}
