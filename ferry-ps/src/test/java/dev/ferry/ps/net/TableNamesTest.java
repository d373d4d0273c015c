package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;

import dev.ferry.ps.PsException;
import org.junit.jupiter.api.Test;

/**
 * {@link TableNames} answers exactly what decoding and encoding anew would, for names met again,
 * names pushed out by others, names that differ in one byte, malformed UTF-8 and the empty name.
 */
class TableNamesTest {

    /** A request body with {@code name} at the header's name offset, in native memory like a receive buffer. */
    private static MemorySegment body(Arena arena, byte[] name) {
        MemorySegment body = arena.allocate(PsDescriptor.HEADER + name.length + 8);
        MemorySegment.copy(name, 0, body, ValueLayout.JAVA_BYTE, PsDescriptor.HEADER, name.length);
        return body;
    }

    private static String decode(MemorySegment body, int length) {
        return TableNames.decode(body, PsDescriptor.HEADER, length);
    }

    @Test
    void aNameMetAgainIsTheSameInstanceAndEqualToADecodeAnew() {
        try (Arena arena = Arena.ofConfined()) {
            byte[] bytes = "embeddings/user".getBytes(StandardCharsets.UTF_8);
            String first = decode(body(arena, bytes), bytes.length);
            String again = decode(body(arena, bytes), bytes.length);
            assertEquals("embeddings/user", first);
            assertSame(first, again, "a name met lately is not decoded again");
            byte[] similar = "embeddings/usEr".getBytes(StandardCharsets.UTF_8);
            assertEquals("embeddings/usEr", decode(body(arena, similar), similar.length), "one byte differs");
            byte[] prefix = "embeddings/use".getBytes(StandardCharsets.UTF_8);
            assertEquals("embeddings/use", decode(body(arena, bytes), prefix.length), "a shorter length is another name");
        }
    }

    @Test
    void namesPushedOutByOthersAreStillRight() {
        try (Arena arena = Arena.ofConfined()) {
            for (int round = 0; round < 3; round++) {
                for (int i = 0; i < TableNames.ENTRIES * 3; i++) {
                    String name = "t" + i + "-é";
                    byte[] bytes = name.getBytes(StandardCharsets.UTF_8);
                    assertEquals(name, decode(body(arena, bytes), bytes.length));
                    assertArrayEquals(bytes, TableNames.encode(name));
                }
            }
        }
    }

    @Test
    void malformedUtf8DecodesAsTheJdkDoesAndIsNeverEncodedBack() {
        try (Arena arena = Arena.ofConfined()) {
            byte[] malformed = {'a', (byte) 0xC3, 'b'};
            String decoded = decode(body(arena, malformed), malformed.length);
            assertEquals(new String(malformed, StandardCharsets.UTF_8), decoded);
            assertEquals(decoded, decode(body(arena, malformed), malformed.length));
            byte[] encoded = TableNames.encode(decoded);
            assertArrayEquals(decoded.getBytes(StandardCharsets.UTF_8), encoded,
                    "encode gives the name's own bytes, not the malformed ones it was read from");
        }
    }

    @Test
    void theEmptyNameDecodesAndIsRefusedOnEncode() {
        try (Arena arena = Arena.ofConfined()) {
            assertEquals("", decode(body(arena, new byte[0]), 0));
            PsException e = assertThrows(PsException.class, () -> TableNames.encode(""));
            assertEquals(PsException.Code.INVALID_ARGUMENT, e.code());
        }
    }

    @Test
    void encodeGivesTheWireBytesAndKeepsThemPerThread() throws Exception {
        byte[] first = TableNames.encode("emb");
        assertSame(first, TableNames.encode(new String("emb")), "an equal name is not encoded again");
        assertArrayEquals("emb".getBytes(StandardCharsets.UTF_8), first);
        byte[][] other = new byte[1][];
        Thread t = Thread.ofPlatform().start(() -> other[0] = TableNames.encode("emb"));
        t.join();
        assertNotSame(first, other[0], "each thread has its own entries");
        assertArrayEquals(first, other[0]);
    }
}
