package dev.ferry.metrics;

import java.util.LinkedHashMap;
import java.util.Map;

/** Prometheus text parsed into {@code name{labels}} to value, for assertions. */
final class Exposition {

    private Exposition() {
    }

    static Map<String, Double> parse(String text) {
        Map<String, Double> samples = new LinkedHashMap<>();
        for (String line : text.split("\n")) {
            if (line.isBlank() || line.startsWith("#")) {
                continue;
            }
            int space = line.lastIndexOf(' ');
            samples.put(line.substring(0, space), Double.parseDouble(line.substring(space + 1)));
        }
        return samples;
    }

    /** The value of the one sample named {@code name} whose labels include all of {@code labels} ("k=\"v\""). */
    static double value(Map<String, Double> samples, String name, String... labels) {
        Double found = null;
        for (Map.Entry<String, Double> e : samples.entrySet()) {
            String key = e.getKey();
            int brace = key.indexOf('{');
            String n = brace < 0 ? key : key.substring(0, brace);
            if (!n.equals(name)) {
                continue;
            }
            boolean all = true;
            for (String l : labels) {
                all &= key.contains(l);
            }
            if (all) {
                if (found != null) {
                    throw new AssertionError("more than one sample " + name + " with " + String.join(",", labels));
                }
                found = e.getValue();
            }
        }
        if (found == null) {
            throw new AssertionError("no sample " + name + " with " + String.join(",", labels) + " in " + samples.keySet());
        }
        return found;
    }
}
