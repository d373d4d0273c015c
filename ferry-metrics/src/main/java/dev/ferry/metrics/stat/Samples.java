package dev.ferry.metrics.stat;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One scrape in Prometheus's text format, parsed: samples by metric name, each with its labels.
 * Lines it does not understand are skipped, so a newer server's extra series do no harm.
 */
public final class Samples {

    /** One sample. */
    public record Sample(Map<String, String> labels, double value) {

        /** The label's value, or "" if absent. */
        public String label(String name) {
            return labels.getOrDefault(name, "");
        }
    }

    private final Map<String, List<Sample>> byName;

    private Samples(Map<String, List<Sample>> byName) {
        this.byName = byName;
    }

    /** Parses {@code text}. */
    public static Samples parse(String text) {
        Map<String, List<Sample>> byName = new LinkedHashMap<>();
        for (String line : text.split("\n")) {
            line = line.strip();
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            try {
                int brace = line.indexOf('{');
                int space;
                String name;
                Map<String, String> labels = new LinkedHashMap<>();
                if (brace >= 0 && brace < line.indexOf(' ')) {
                    name = line.substring(0, brace);
                    int end = parseLabels(line, brace + 1, labels);
                    space = end;
                } else {
                    space = line.indexOf(' ');
                    name = line.substring(0, space);
                }
                String rest = line.substring(space).strip();
                int more = rest.indexOf(' ');
                String number = more < 0 ? rest : rest.substring(0, more); // a timestamp may follow
                double value = switch (number) {
                    case "+Inf" -> Double.POSITIVE_INFINITY;
                    case "-Inf" -> Double.NEGATIVE_INFINITY;
                    case "NaN" -> Double.NaN;
                    default -> Double.parseDouble(number);
                };
                byName.computeIfAbsent(name, k -> new ArrayList<>()).add(new Sample(labels, value));
            } catch (RuntimeException e) {
                // not a sample line we understand
            }
        }
        return new Samples(byName);
    }

    /** Reads {@code k="v",...}} from {@code at}; returns the index after the closing brace. */
    private static int parseLabels(String line, int at, Map<String, String> labels) {
        int i = at;
        while (line.charAt(i) != '}') {
            int eq = line.indexOf('=', i);
            String key = line.substring(i, eq).strip();
            int q = eq + 2; // after ="
            StringBuilder v = new StringBuilder();
            while (line.charAt(q) != '"') {
                char c = line.charAt(q);
                if (c == '\\') {
                    char n = line.charAt(++q);
                    v.append(n == 'n' ? '\n' : n);
                } else {
                    v.append(c);
                }
                q++;
            }
            labels.put(key, v.toString());
            i = q + 1;
            if (line.charAt(i) == ',') {
                i++;
            }
        }
        return i + 1;
    }

    /** The samples named {@code name} (empty if none). */
    public List<Sample> all(String name) {
        return byName.getOrDefault(name, Collections.emptyList());
    }

    /** The sum of the samples named {@code name} whose labels include {@code labels} (k, v pairs); NaN ignored. */
    public double sum(String name, String... labels) {
        double sum = 0;
        for (Sample s : all(name)) {
            if (matches(s, labels) && !Double.isNaN(s.value())) {
                sum += s.value();
            }
        }
        return sum;
    }

    /** True if some sample is named {@code name}. */
    public boolean has(String name) {
        return byName.containsKey(name);
    }

    static boolean matches(Sample s, String... labels) {
        for (int i = 0; i < labels.length; i += 2) {
            if (!s.label(labels[i]).equals(labels[i + 1])) {
                return false;
            }
        }
        return true;
    }
}
