package dev.ferry.metrics;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Pattern;

import dev.ferry.ps.net.PsDescriptor;
import dev.ferry.rpc.RpcMethod;

/**
 * Names of RPC methods for the {@code method} tag. A call of a method without a name is counted
 * under {@code other}, so a client cannot grow the number of series by calling made-up ids.
 *
 * @param names method id to a name in Prometheus's label style ({@code [a-z0-9_]+})
 */
public record MethodNames(Map<Integer, String> names) {

    /** The tag value of methods without a name. */
    public static final String OTHER = "other";

    /** The most methods one registry names. */
    public static final int MAX = 64;

    private static final Pattern NAME = Pattern.compile("[a-z][a-z0-9_]*");

    /** Checks the names and keeps a copy in their order. */
    public MethodNames {
        if (names.size() > MAX) {
            throw new IllegalArgumentException("at most " + MAX + " method names, got " + names.size());
        }
        for (String n : names.values()) {
            if (!NAME.matcher(n).matches() || n.equals(OTHER)) {
                throw new IllegalArgumentException("a method name is [a-z][a-z0-9_]* and not '" + OTHER + "': " + n);
            }
        }
        names = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(names));
    }

    /** No names: every method is {@code other}. */
    public static MethodNames none() {
        return new MethodNames(Map.of());
    }

    /** The parameter server's methods: pull, push, dense_pull, dense_push, create_table, describe, routing, ... */
    public static MethodNames parameterServer() {
        Map<Integer, String> m = new LinkedHashMap<>();
        put(m, PsDescriptor.PULL, "pull");
        put(m, PsDescriptor.PUSH, "push");
        put(m, PsDescriptor.DENSE_PULL, "dense_pull");
        put(m, PsDescriptor.DENSE_PUSH, "dense_push");
        put(m, PsDescriptor.CREATE_TABLE, "create_table");
        put(m, PsDescriptor.DESCRIBE, "describe");
        put(m, PsDescriptor.SLOT_TABLE, "slot_table");
        put(m, PsDescriptor.CHECKPOINT, "checkpoint");
        put(m, PsDescriptor.ROUTING, "routing");
        put(m, PsDescriptor.MOVE_BEGIN, "move_begin");
        put(m, PsDescriptor.MOVE_ROWS, "move_rows");
        return new MethodNames(m);
    }

    /** These names and {@code id} named {@code name}. */
    public MethodNames with(int id, String name) {
        Map<Integer, String> m = new LinkedHashMap<>(names);
        m.put(id, name);
        return new MethodNames(m);
    }

    private static void put(Map<Integer, String> m, RpcMethod method, String name) {
        m.put(method.id(), name);
    }
}
