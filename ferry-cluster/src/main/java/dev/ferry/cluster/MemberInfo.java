package dev.ferry.cluster;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * What a server says of itself in its ephemeral member node.
 *
 * @param id          its member id, unique in the cluster and stable across restarts
 * @param incarnation different each time the process starts (a restart is a new incarnation)
 * @param host        the host it runs on
 * @param endpoints   provider to address, the first one being where clients call it
 * @param capacity    rows it may hold (informational; placement is even for now)
 */
public record MemberInfo(String id, long incarnation, String host, Map<String, String> endpoints, long capacity) {

    /** Checks the values. */
    public MemberInfo {
        Objects.requireNonNull(id, "id");
        Objects.requireNonNull(host, "host");
        endpoints = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(endpoints));
        if (id.isBlank() || id.contains("/") || id.contains("\n") || endpoints.isEmpty()) {
            throw new IllegalArgumentException("a member needs an id without '/' and an endpoint: '" + id + "', "
                    + endpoints);
        }
    }

    /** The address clients call it at: its first endpoint. */
    public String address() {
        return endpoints.values().iterator().next();
    }

    /** The node's bytes: {@code key=value} lines, UTF-8. */
    public byte[] encode() {
        StringBuilder b = new StringBuilder();
        b.append("id=").append(id).append('\n');
        b.append("incarnation=").append(incarnation).append('\n');
        b.append("host=").append(host).append('\n');
        b.append("capacity=").append(capacity).append('\n');
        endpoints.forEach((provider, address) -> b.append("endpoint.").append(provider).append('=').append(address)
                .append('\n'));
        return b.toString().getBytes(StandardCharsets.UTF_8);
    }

    /**
     * Reads a member node.
     *
     * @throws IllegalArgumentException if it is not one
     */
    public static MemberInfo decode(byte[] data) {
        Map<String, String> values = new LinkedHashMap<>();
        Map<String, String> endpoints = new LinkedHashMap<>();
        for (String line : new String(data, StandardCharsets.UTF_8).split("\n")) {
            int eq = line.indexOf('=');
            if (eq <= 0) {
                continue;
            }
            String key = line.substring(0, eq);
            if (key.startsWith("endpoint.")) {
                endpoints.put(key.substring("endpoint.".length()), line.substring(eq + 1));
            } else {
                values.put(key, line.substring(eq + 1));
            }
        }
        try {
            return new MemberInfo(values.get("id"), Long.parseLong(values.get("incarnation")), values.get("host"),
                    endpoints, Long.parseLong(values.get("capacity")));
        } catch (RuntimeException e) {
            throw new IllegalArgumentException("not a member node: " + values, e);
        }
    }
}
