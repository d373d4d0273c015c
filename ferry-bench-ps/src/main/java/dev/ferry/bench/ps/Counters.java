package dev.ferry.bench.ps;

import java.lang.reflect.RecordComponent;
import java.util.Map;

/** Record-valued counters flattened into {@code snake_case} names. */
final class Counters {

    private Counters() {
    }

    /** Puts every numeric component of {@code record} into {@code out}, named {@code prefix + snake_case}. */
    static void put(Map<String, Long> out, String prefix, Record record) {
        for (RecordComponent component : record.getClass().getRecordComponents()) {
            try {
                Object value = component.getAccessor().invoke(record);
                if (value instanceof Number n) {
                    out.put(prefix + snake(component.getName()), n.longValue());
                }
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException("cannot read " + component, e);
            }
        }
    }

    static String snake(String camel) {
        StringBuilder s = new StringBuilder(camel.length() + 4);
        for (int i = 0; i < camel.length(); i++) {
            char c = camel.charAt(i);
            if (Character.isUpperCase(c)) {
                s.append('_').append(Character.toLowerCase(c));
            } else {
                s.append(c);
            }
        }
        return s.toString();
    }
}
