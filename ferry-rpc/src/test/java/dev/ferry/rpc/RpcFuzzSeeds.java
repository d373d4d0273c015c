package dev.ferry.rpc;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Writes the seed inputs of {@link RpcDescriptorFuzzTest} with {@link RpcDescriptor#write}
 * (run from the module directory; see docs/fuzzing.md): one frame of each type with a typical body.
 */
public final class RpcFuzzSeeds {

    private RpcFuzzSeeds() {
    }

    public static void main(String[] args) throws IOException {
        Path dir = Path.of(args.length > 0 ? args[0] : "src/test/resources/dev/ferry/rpc/RpcDescriptorFuzzTestInputs/header");
        Files.createDirectories(dir);
        write(dir, "request", RpcDescriptor.REQUEST, RpcDescriptor.FLAG_IDEMPOTENT, 0x5001, 2_000_000, 41, new byte[24]);
        write(dir, "response", RpcDescriptor.RESPONSE, (byte) 0, 0x5001, 0, 0x77, new byte[16]);
        write(dir, "error", RpcDescriptor.ERROR, (byte) 0, 0x5002, RpcDescriptor.STATUS_REMOTE_EXCEPTION, 0x77,
                "dev.ferry.ps.PsException\nUNKNOWN_TABLE: no table 'x'".getBytes(StandardCharsets.UTF_8));
        write(dir, "ping", RpcDescriptor.PING, (byte) 0, 0, 0, 40, new byte[0]);
        write(dir, "hello", RpcDescriptor.HELLO, (byte) 0, 0, 0, 0, new byte[16]);
        write(dir, "challenge", RpcDescriptor.CHALLENGE, (byte) 0, 0, 0, 0x77, new byte[48]);
        write(dir, "auth", RpcDescriptor.AUTH, (byte) 0, 0, 0, 0, new byte[32]);
        write(dir, "refused", RpcDescriptor.REFUSED, (byte) 0, 0, 0, 0,
                "authentication failed".getBytes(StandardCharsets.UTF_8));
        write(dir, "cancel", RpcDescriptor.CANCEL, (byte) 0, 0x5002, 0, 0, new byte[0]);
    }

    private static void write(Path dir, String name, byte type, byte flags, int method, long deadlineOrStatus,
            long ackOrEpoch, byte[] body) throws IOException {
        byte[] frame = new byte[RpcDescriptor.HEADER + body.length];
        MemorySegment segment = MemorySegment.ofArray(frame);
        RpcDescriptor.write(segment, type, flags, method, 0x1234_5678_9abcL, 7, deadlineOrStatus, ackOrEpoch);
        MemorySegment.copy(body, 0, segment, ValueLayout.JAVA_BYTE, RpcDescriptor.HEADER, body.length);
        Files.write(dir.resolve(name), frame);
    }
}
