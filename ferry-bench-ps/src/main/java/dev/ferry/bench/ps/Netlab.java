package dev.ferry.bench.ps;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The emulated leaf switch of {@code bin/netlab} as the benchmarks use it: the receiver namespace
 * ({@code <prefix>-r}, 10.200.0.254) runs the server, sender namespace {@code <prefix>-s<i>}
 * (10.200.0.i) runs worker process i - 1, each started with {@code ip netns exec}; and the
 * network's counters, read from every namespace before and after a measured interval: drops at
 * the bottleneck (the receiver's switch port), drops anywhere else (which would distort the
 * run), TCP retransmitted segments and retransmission timeouts.
 */
final class Netlab {

    static final String RECEIVER_HOST = "10.200.0.254";
    private static final Path STATE_DIR = Path.of("/run/ferry-netlab");

    private final String prefix;
    private final int hosts;
    private final String settings;

    private Netlab(String prefix, int hosts, String settings) {
        this.prefix = prefix;
        this.hosts = hosts;
        this.settings = settings;
    }

    /**
     * The lab that {@code bin/netlab up} built ({@code NETLAB_PREFIX} names it, default {@code fnl}).
     *
     * @throws IllegalStateException if it is not up
     */
    static Netlab open() {
        String prefix = System.getenv().getOrDefault("NETLAB_PREFIX", "fnl");
        Path state = STATE_DIR.resolve(prefix + ".state");
        List<String> lines;
        try {
            lines = Files.readAllLines(state);
        } catch (IOException e) {
            throw new IllegalStateException("--network netlab: no lab is up (" + state + " is missing): run "
                    + "sudo bin/netlab up first (docs/netlab.md)");
        }
        int hosts = 0;
        String settings = "";
        boolean ready = false;
        for (String line : lines) {
            if (line.startsWith("hosts=")) {
                hosts = Integer.parseInt(line.substring(6).trim());
            } else if (line.startsWith("settings=")) {
                settings = line.substring(9).replace("'", "");
            } else if (line.equals("ready=1")) {
                ready = true;
            }
        }
        if (!ready || hosts < 1) {
            throw new IllegalStateException("--network netlab: the lab " + prefix + " is half built (a crash?): "
                    + "sudo bin/netlab down, then up");
        }
        return new Netlab(prefix, hosts, settings);
    }

    int hosts() {
        return hosts;
    }

    /** The lab's settings, as {@code bin/netlab up} recorded them. */
    String settings() {
        return settings;
    }

    /**
     * The pull budget for Ferry's receivers on this lab ({@link
     * dev.ferry.transport.TransportConfig#pullBudgetFor}): the link's bandwidth-delay product
     * (100 us of round trip, what ping shows here) plus three quarters of the receiver's port buffer.
     */
    long pullBudget() {
        return dev.ferry.transport.TransportConfig.pullBudgetFor(rateBitsPerSecond(), 100, setting("buffer", 256 * 1024));
    }

    /** The receiver's port rate in bits per second, as {@code bin/netlab up} set it (2 Gbit/s if unreadable). */
    long rateBitsPerSecond() {
        String rate = settingText("rate", "2gbit").toLowerCase(java.util.Locale.ROOT);
        long unit = rate.endsWith("gbit") ? 1_000_000_000L : rate.endsWith("mbit") ? 1_000_000L
                : rate.endsWith("kbit") ? 1_000L : 1L;
        String number = rate.replaceAll("[a-z]+$", "");
        try {
            return (long) (Double.parseDouble(number) * unit);
        } catch (NumberFormatException e) {
            return 2_000_000_000L;
        }
    }

    private long setting(String key, long fallback) {
        try {
            return Long.parseLong(settingText(key, String.valueOf(fallback)));
        } catch (NumberFormatException e) {
            return fallback;
        }
    }

    private String settingText(String key, String fallback) {
        for (String kv : settings.split(" ")) {
            if (kv.startsWith(key + "=")) {
                return kv.substring(key.length() + 1);
            }
        }
        return fallback;
    }

    String receiverNamespace() {
        return prefix + "-r";
    }

    /** The namespace of worker process {@code p} (0-based). */
    String senderNamespace(int p) {
        return prefix + "-s" + (p + 1);
    }

    /** The address worker process {@code p} binds to. */
    static String senderHost(int p) {
        return "10.200.0." + (p + 1);
    }

    /** The command prefix that runs a command in {@code namespace}. */
    static List<String> in(String namespace) {
        return List.of("ip", "netns", "exec", namespace);
    }

    /** The network's counters now, summed over the lab ({@code net_*}). */
    Map<String, Long> counters() {
        Map<String, Long> c = new LinkedHashMap<>();
        long[] bottleneck = qdisc(prefix + "-sw", "pr");
        c.put("net_bottleneck_packets", bottleneck[0]);
        c.put("net_bottleneck_drops", bottleneck[1]);
        c.put("net_bottleneck_bytes", bottleneck[2]);
        long other = 0;
        long retrans = 0;
        long timeouts = 0;
        List<String> namespaces = new ArrayList<>();
        namespaces.add(receiverNamespace());
        for (int i = 0; i < hosts; i++) {
            other += qdisc(prefix + "-sw", "p" + (i + 1))[1];
            namespaces.add(senderNamespace(i));
        }
        for (String ns : namespaces) {
            other += qdisc(ns, "eth0")[1];
            long[] tcp = tcp(ns);
            retrans += tcp[0];
            timeouts += tcp[1];
        }
        c.put("net_other_drops", other);
        c.put("net_tcp_retrans_segs", retrans);
        c.put("net_tcp_timeouts", timeouts);
        c.put("net_softnet_drops", softnetDrops());
        return c;
    }

    /** {@code after - before}, key by key. */
    static Map<String, Long> delta(Map<String, Long> before, Map<String, Long> after) {
        Map<String, Long> d = new LinkedHashMap<>();
        after.forEach((k, v) -> d.put(k, v - before.getOrDefault(k, 0L)));
        return d;
    }

    /** Sent packets, drops and sent bytes of the root qdisc of {@code dev} in {@code ns}. */
    private static long[] qdisc(String ns, String dev) {
        return qdiscCounters(run(List.of("tc", "-s", "-n", ns, "qdisc", "show", "dev", dev, "root")));
    }

    /** Sent packets, drops and sent bytes in the output of {@code tc -s qdisc show} ("Sent B bytes P pkt (dropped D, ..."). */
    static long[] qdiscCounters(String out) {
        long sent = 0;
        long dropped = 0;
        long bytes = 0;
        String[] words = out.replace(",", " ").replace("(", " ").split("\\s+");
        for (int i = 1; i < words.length; i++) {
            if (words[i].equals("pkt")) {
                sent = parse(words[i - 1]);
            } else if (words[i].equals("bytes") && i >= 2 && words[i - 2].equals("Sent")) {
                bytes = parse(words[i - 1]);
            } else if (words[i - 1].equals("dropped")) {
                dropped = parse(words[i]);
            }
        }
        return new long[] {sent, dropped, bytes};
    }

    /** RetransSegs and TCPTimeouts of {@code ns}. */
    private static long[] tcp(String ns) {
        String out = run(List.of("ip", "netns", "exec", ns, "cat", "/proc/net/snmp", "/proc/net/netstat"));
        return new long[] {field(out, "Tcp:", "RetransSegs"), field(out, "TcpExt:", "TCPTimeouts")};
    }

    private static long field(String snmp, String table, String name) {
        String header = null;
        for (String line : snmp.split("\n")) {
            if (!line.startsWith(table)) {
                continue;
            }
            if (header == null) {
                header = line;
                continue;
            }
            String[] names = header.trim().split("\\s+");
            String[] values = line.trim().split("\\s+");
            for (int i = 1; i < names.length && i < values.length; i++) {
                if (names[i].equals(name)) {
                    return parse(values[i]);
                }
            }
            return 0;
        }
        return 0;
    }

    private static long softnetDrops() {
        try {
            long sum = 0;
            for (String line : Files.readAllLines(Path.of("/proc/net/softnet_stat"))) {
                String[] f = line.trim().split("\\s+");
                if (f.length > 1) {
                    sum += Long.parseLong(f[1], 16);
                }
            }
            return sum;
        } catch (IOException | NumberFormatException e) {
            return 0;
        }
    }

    private static long parse(String s) {
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    private static String run(List<String> command) {
        try {
            Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(10, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IllegalStateException(String.join(" ", command) + " hung");
            }
            return out;
        } catch (IOException e) {
            throw new IllegalStateException("cannot run " + String.join(" ", command) + ": " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }
}
