package dev.ferry.bench.ps;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The {@code key=value} arguments the driver passes to its children. */
final class Args {

    private final Map<String, String> values = new LinkedHashMap<>();

    private Args() {
    }

    static Args parse(String[] args) {
        Args parsed = new Args();
        for (String arg : args) {
            int eq = arg.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("expected key=value: " + arg);
            }
            parsed.values.put(arg.substring(0, eq), arg.substring(eq + 1));
        }
        return parsed;
    }

    static Args of() {
        return new Args();
    }

    Args with(String key, Object value) {
        values.put(key, String.valueOf(value));
        return this;
    }

    boolean has(String key) {
        return values.containsKey(key);
    }

    String string(String key) {
        String v = values.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing argument " + key);
        }
        return v;
    }

    int integer(String key) {
        return Integer.parseInt(string(key));
    }

    long longValue(String key) {
        return Long.parseLong(string(key));
    }

    double decimal(String key) {
        return Double.parseDouble(string(key));
    }

    boolean bool(String key) {
        return Boolean.parseBoolean(string(key));
    }

    List<String> toList() {
        List<String> out = new ArrayList<>();
        values.forEach((k, v) -> out.add(k + "=" + v));
        return out;
    }
}
