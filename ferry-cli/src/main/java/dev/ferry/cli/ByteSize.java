package dev.ferry.cli;

import dev.ferry.bench.pingpong.PingPongSpec;
import java.util.Locale;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.TypeConversionException;

/** A byte count such as {@code 64}, {@code 4k}, {@code 4KiB} or {@code 1m} (binary multiples). */
final class ByteSize implements ITypeConverter<Integer> {

    @Override
    public Integer convert(String value) {
        String v = value.trim().toLowerCase(Locale.ROOT);
        long unit = 1;
        for (String[] suffix : new String[][] {{"kib", "1024"}, {"mib", "1048576"}, {"gib", "1073741824"},
                {"k", "1024"}, {"m", "1048576"}, {"g", "1073741824"}, {"b", "1"}}) {
            if (v.endsWith(suffix[0])) {
                unit = Long.parseLong(suffix[1]);
                v = v.substring(0, v.length() - suffix[0].length());
                break;
            }
        }
        long bytes;
        try {
            bytes = Math.multiplyExact(Long.parseLong(v), unit);
        } catch (NumberFormatException | ArithmeticException e) {
            throw new TypeConversionException("'" + value + "' is not a byte count (such as 64, 4k, 1m)");
        }
        if (bytes > PingPongSpec.MAX_SIZE) {
            throw new TypeConversionException("size " + value + " exceeds the limit of " + PingPongSpec.MAX_SIZE
                    + " bytes (64 MiB)");
        }
        if (bytes < 0) {
            throw new TypeConversionException("size must not be negative: " + value);
        }
        return (int) bytes;
    }
}
