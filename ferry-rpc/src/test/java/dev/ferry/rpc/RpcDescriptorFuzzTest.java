package dev.ferry.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.ferry.transport.SharedSecret;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;

/**
 * Fuzzes the RPC header as the server and the client read it from a received message: a frame
 * that {@link RpcDescriptor#valid} refuses is dropped; one it passes has every field readable
 * within the frame (a native segment of exactly the received size, so a read past it throws),
 * and the bodies the layer decodes (an error's "class\nmessage", a challenge's nonce and proof,
 * a refusal's reason) come apart without an exception.
 */
class RpcDescriptorFuzzTest {

    private static final MemorySegment BUFFER = Arena.global().allocate(1 << 16, 64);

    @FuzzTest
    void header(byte[] data) {
        MemorySegment frame = data.length <= BUFFER.byteSize()
                ? BUFFER.asSlice(0, data.length).copyFrom(MemorySegment.ofArray(data))
                : Arena.ofAuto().allocate(data.length).copyFrom(MemorySegment.ofArray(data));
        if (!RpcDescriptor.valid(frame)) {
            assertTrue(data.length < RpcDescriptor.HEADER || RpcDescriptor.version(frame) != RpcDescriptor.VERSION);
            return;
        }
        byte type = RpcDescriptor.type(frame);
        assertNotNull(RpcDescriptor.typeName(type));
        RpcDescriptor.flags(frame);
        RpcDescriptor.method(frame);
        RpcDescriptor.clientId(frame);
        RpcDescriptor.callId(frame);
        RpcDescriptor.ack(frame);
        RpcDescriptor.epoch(frame);
        // The server turns the deadline into an instant: saturating, never an overflow exception.
        TimeUnit.MICROSECONDS.toNanos(RpcDescriptor.deadlineMicros(frame));
        RpcDescriptor.status(frame);
        MemorySegment body = RpcDescriptor.body(frame);
        assertEquals(data.length - RpcDescriptor.HEADER, body.byteSize());
        byte[] bytes = body.toArray(ValueLayout.JAVA_BYTE);
        switch (type) {
            case RpcDescriptor.ERROR, RpcDescriptor.REFUSED -> {
                String text = new String(bytes, StandardCharsets.UTF_8);
                int newline = text.indexOf('\n');
                String remoteClass = newline < 0 ? text : text.substring(0, newline);
                String remoteMessage = newline < 0 ? "" : text.substring(newline + 1);
                assertTrue(remoteClass.length() + remoteMessage.length() <= text.length());
            }
            case RpcDescriptor.CHALLENGE -> {
                if (bytes.length >= SharedSecret.NONCE_BYTES) {
                    byte[] nonce = Arrays.copyOf(bytes, SharedSecret.NONCE_BYTES);
                    byte[] proof = Arrays.copyOfRange(bytes, SharedSecret.NONCE_BYTES, bytes.length);
                    assertEquals(bytes.length, nonce.length + proof.length);
                }
            }
            default -> {
                // REQUEST, HELLO, AUTH, PING, CANCEL...: the body goes to the handler or the HMAC as is.
            }
        }
    }
}
