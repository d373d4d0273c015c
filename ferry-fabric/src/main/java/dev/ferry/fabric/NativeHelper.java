package dev.ferry.fabric;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * Loads a small native library that a module builds for the machine that builds it
 * ({@code bin/build-native}) into its classes, beside its owner: {@code native/<arch>/<name>}.
 */
public final class NativeHelper {

    private NativeHelper() {
    }

    /**
     * The library {@code name} of {@code owner}'s package for this machine, copied to a temporary
     * file for the loader, which is deleted once loaded (the mapping stays for the process's life).
     *
     * @throws UnsupportedOperationException off Linux, or where the jar holds no build for this machine
     */
    public static SymbolLookup load(Class<?> owner, String name) throws IOException {
        String machine = switch (System.getProperty("os.arch")) {
            case "amd64", "x86_64" -> "x86_64";
            case "aarch64", "arm64" -> "aarch64";
            default -> System.getProperty("os.arch");
        };
        String resource = "native/" + machine + "/" + name;
        if (!System.getProperty("os.name").startsWith("Linux")) {
            throw new UnsupportedOperationException(name + " is built for Linux only");
        }
        Path file = Files.createTempFile(name.replace(".so", "") + "-", ".so");
        try {
            try (InputStream in = owner.getResourceAsStream(resource)) {
                if (in == null) {
                    throw new UnsupportedOperationException("no " + resource + " for this machine in the jar");
                }
                Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
            }
            return SymbolLookup.libraryLookup(file, Arena.global());
        } finally {
            Files.deleteIfExists(file);
        }
    }
}
