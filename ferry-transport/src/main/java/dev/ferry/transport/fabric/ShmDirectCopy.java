package dev.ferry.transport.fabric;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/**
 * Whether libfabric's shm provider will likely copy a message straight from the sender's memory
 * into the receiver's (cross-memory attach, {@code process_vm_readv}), so that a posted send
 * needs nothing more from its sender's progress. Where the kernel refuses that copy between
 * unrelated processes (Yama's {@code ptrace_scope} of 1 or more), or it is switched off
 * ({@code FI_SHM_DISABLE_CMA}), shm moves larger messages through its shared bounce buffers
 * (SAR) in turns of both sides' progress, and the sender's progress thread must keep turning
 * while its sends are in flight. {@code -Dferry.transport.shmDirectCopy=true|false} overrides
 * the guess. Read once; stateless otherwise.
 */
final class ShmDirectCopy {

    private static final Path PTRACE_SCOPE = Path.of("/proc/sys/kernel/yama/ptrace_scope");
    private static final boolean LIKELY = decide();

    private ShmDirectCopy() {
    }

    /** Whether shm's sends most likely complete by the direct copy. */
    static boolean likely() {
        return LIKELY;
    }

    private static boolean decide() {
        String forced = System.getProperty("ferry.transport.shmDirectCopy");
        if (forced != null) {
            return Boolean.parseBoolean(forced);
        }
        return directCopyAllowed(System.getenv("FI_SHM_DISABLE_CMA"), ptraceScope());
    }

    /**
     * The rule, apart from where its inputs come from: {@code disableCma} is the environment
     * variable's value (null: unset), {@code ptraceScope} Yama's setting (-1: no Yama).
     */
    static boolean directCopyAllowed(String disableCma, int ptraceScope) {
        if (disableCma != null && switchedOn(disableCma)) {
            return false;
        }
        return ptraceScope <= 0;
    }

    private static boolean switchedOn(String value) {
        return switch (value.trim().toLowerCase(Locale.ROOT)) {
            case "1", "on", "true", "yes", "y" -> true;
            default -> false;
        };
    }

    private static int ptraceScope() {
        try {
            return Integer.parseInt(Files.readString(PTRACE_SCOPE).trim());
        } catch (IOException | NumberFormatException | SecurityException e) {
            return -1; // no Yama (or unreadable): the kernel's default allows the copy to the owner
        }
    }
}
