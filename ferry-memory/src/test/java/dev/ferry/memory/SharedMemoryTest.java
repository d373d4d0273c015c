package dev.ferry.memory;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.stream.Stream;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Sealed memfds a peer on this host maps read-only through {@code /proc/<pid>/fd/<fd>}: the
 * owner's region, a peer's mapping of it (here the peer is this same process), the checks a peer
 * makes before it maps, what closing either side does, and the allocator's shared send pool.
 */
class SharedMemoryTest {

    private static final long PID = ProcessHandle.current().pid();

    @BeforeEach
    void linuxOnly() {
        Assumptions.assumeTrue(SharedMemory.available(), "no memfd_create (not Linux)");
    }

    @Test
    void aRegionIsAlignedZeroedWritableAndAPeerMappingSharesItReadOnly() throws IOException {
        String name = uniqueName();
        long bytes = 64 * 1024 + 3;
        long alignment = 1L << 20;
        try (Arena owner = Arena.ofShared(); Arena peer = Arena.ofShared()) {
            SharedMemory.Region region = SharedMemory.create(owner, name, bytes, alignment);
            assertEquals(name, region.name());
            assertTrue(region.fd() >= 0, "fd " + region.fd());
            assertEquals("/memfd:" + name + " (deleted)", link(region.fd()));
            MemorySegment segment = region.segment();
            assertEquals(bytes, segment.byteSize());
            assertEquals(0, segment.address() % alignment, "address " + Long.toHexString(segment.address()));
            assertEquals(-1, segment.mismatch(MemorySegment.ofArray(new byte[(int) bytes])), "not zeroed");
            String ownerPerms = perms(segment.address());
            assertNotNull(ownerPerms, "the owner's mapping is not in /proc/self/maps");
            assertTrue(ownerPerms.startsWith("rw") && ownerPerms.endsWith("s"), "owner mapping " + ownerPerms);

            byte[] pattern = pattern(bytes, 1);
            MemorySegment.copy(pattern, 0, segment, ValueLayout.JAVA_BYTE, 0, pattern.length);
            assertArrayEquals(pattern, segment.toArray(ValueLayout.JAVA_BYTE));

            MemorySegment mapped = SharedMemory.mapPeer(peer, PID, region.fd(), name, bytes);
            assertEquals(bytes, mapped.byteSize());
            assertTrue(mapped.address() != segment.address(), "the peer mapping is a mapping of its own");
            assertArrayEquals(pattern, mapped.toArray(ValueLayout.JAVA_BYTE), "the peer sees what the owner wrote");
            assertEquals(1, openDescriptorsOf(name), "mapPeer leaves no descriptor open");

            // Shared, not a copy: later writes show through the peer's mapping.
            byte[] later = pattern(bytes, 77);
            MemorySegment.copy(later, 0, segment, ValueLayout.JAVA_BYTE, 0, later.length);
            assertArrayEquals(later, mapped.toArray(ValueLayout.JAVA_BYTE), "the peer sees later writes");

            // Read-only: the kernel maps it without write permission (writing would be a SIGSEGV).
            for (long at : new long[] {mapped.address(), mapped.address() + bytes - 1}) {
                String peerPerms = perms(at);
                assertNotNull(peerPerms, "the peer mapping is not in /proc/self/maps at " + Long.toHexString(at));
                assertEquals('r', peerPerms.charAt(0), peerPerms);
                assertEquals('-', peerPerms.charAt(1), "the peer mapping is writable: " + peerPerms);
                assertEquals('s', peerPerms.charAt(3), "the peer mapping is not shared: " + peerPerms);
                assertTrue(mapLine(at).endsWith("/memfd:" + name + " (deleted)"), mapLine(at));
            }
        }
    }

    @Test
    void mapPeerRefusesWhatItMustNotMap(@TempDir Path dir) throws Throwable {
        String name = uniqueName();
        long bytes = 8192;
        try (Arena owner = Arena.ofShared(); Arena peer = Arena.ofShared()) {
            SharedMemory.Region region = SharedMemory.create(owner, name, bytes, 4096);
            int fd = region.fd();

            IOException wrongName = assertThrows(IOException.class,
                    () -> SharedMemory.mapPeer(peer, PID, fd, name + "-other", bytes));
            assertTrue(wrongName.getMessage().contains("/memfd:" + name + " (deleted)")
                    && wrongName.getMessage().contains("not /memfd:" + name + "-other"), wrongName.getMessage());

            IOException tooLong = assertThrows(IOException.class,
                    () -> SharedMemory.mapPeer(peer, PID, fd, name, bytes + 1));
            assertTrue(tooLong.getMessage().contains("holds " + bytes + " bytes, not " + (bytes + 1)),
                    tooLong.getMessage());

            int notOpen = notOpenDescriptor();
            IOException noFd = assertThrows(IOException.class,
                    () -> SharedMemory.mapPeer(peer, PID, notOpen, name, bytes));
            assertTrue(noFd.getMessage().contains("/proc/" + PID + "/fd/" + notOpen)
                    && noFd.getMessage().contains("errno 2"), noFd.getMessage());

            long noPid = Long.parseLong(Files.readString(Path.of("/proc/sys/kernel/pid_max")).trim()) + 1;
            IOException noProcess = assertThrows(IOException.class,
                    () -> SharedMemory.mapPeer(peer, noPid, fd, name, bytes));
            assertTrue(noProcess.getMessage().contains("/proc/" + noPid + "/fd/" + fd)
                    && noProcess.getMessage().contains("errno 2"), noProcess.getMessage());

            IOException bad = assertThrows(IOException.class, () -> SharedMemory.mapPeer(peer, PID, -1, name, bytes));
            assertTrue(bad.getMessage().contains("bad shared memory reference"), bad.getMessage());

            // A plain file is another file, whatever its name.
            Path file = dir.resolve(name);
            Files.write(file, new byte[(int) bytes]);
            try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
                assertTrue(channel.isOpen());
                int fileFd = descriptorLinkingTo(file.toRealPath().toString());
                assertTrue(fileFd >= 0, "no descriptor of " + file + " in /proc/self/fd");
                IOException plain = assertThrows(IOException.class,
                        () -> SharedMemory.mapPeer(peer, PID, fileFd, name, bytes));
                assertTrue(plain.getMessage().contains("is " + file.toRealPath() + ", not /memfd:" + name),
                        plain.getMessage());
            }

            // A memfd of the right name and size, but not sealed: its owner could shrink it under the peer.
            String unsealedName = uniqueName();
            int unsealed = unsealedMemfd(unsealedName, bytes);
            try {
                IOException notSealed = assertThrows(IOException.class,
                        () -> SharedMemory.mapPeer(peer, PID, unsealed, unsealedName, bytes));
                assertTrue(notSealed.getMessage().contains("not sealed"), notSealed.getMessage());
                assertEquals(1, openDescriptorsOf(unsealedName), "the refused mapPeer left a descriptor open");
            } finally {
                closeFd(unsealed);
            }

            assertEquals(1, openDescriptorsOf(name), "a refused mapPeer left a descriptor open");
            assertEquals(1, mappingsOf(name), "the owner's mapping only: nothing was mapped for the peer");
            // Still mappable as it is.
            MemorySegment ok = SharedMemory.mapPeer(peer, PID, fd, name, bytes);
            assertEquals(bytes, ok.byteSize());
        }
    }

    @Test
    void probeOpensTheAllocatorsProbeAndRefusesAnotherName() throws IOException {
        try (RegisteredAllocator allocator = new RegisteredAllocator(new CountingRegistrar(),
                AllocatorConfig.defaults().withSlabBytes(1 << 20).withSharedSendPool(true))) {
            assertTrue(allocator.sharesSendPool());
            String prefix = allocator.sharedPrefix();
            assertNotNull(prefix);
            int probeFd = allocator.sharedProbeFd();
            assertTrue(probeFd >= 0, "probe fd " + probeFd);
            assertEquals("/memfd:" + prefix + "-probe (deleted)", link(probeFd));
            SharedMemory.probe(PID, probeFd, prefix + "-probe");
            IOException wrong = assertThrows(IOException.class, () -> SharedMemory.probe(PID, probeFd, prefix + "-0"));
            assertTrue(wrong.getMessage().contains("not /memfd:" + prefix + "-0"), wrong.getMessage());
            int notOpen = notOpenDescriptor();
            assertThrows(IOException.class, () -> SharedMemory.probe(PID, notOpen, prefix + "-probe"));
            assertEquals(1, openDescriptorsOf(prefix + "-probe"), "probe leaves no descriptor open");
        }
    }

    @Test
    void closingTheOwnerUnmapsAndClosesButAPeerMappingKeepsThePages() throws IOException {
        String name = uniqueName();
        long bytes = 3 * 4096;
        byte[] pattern = pattern(bytes, 5);
        Arena owner = Arena.ofShared();
        Arena peer = Arena.ofShared();
        long ownerAddress;
        long peerAddress;
        int fd;
        MemorySegment mapped;
        try {
            SharedMemory.Region region = SharedMemory.create(owner, name, bytes, 4096);
            fd = region.fd();
            ownerAddress = region.segment().address();
            MemorySegment.copy(pattern, 0, region.segment(), ValueLayout.JAVA_BYTE, 0, pattern.length);
            mapped = SharedMemory.mapPeer(peer, PID, fd, name, bytes);
            peerAddress = mapped.address();
            assertEquals(2, mappingsOf(name), "the owner's and the peer's mappings");
        } finally {
            owner.close();
        }
        try {
            String line = mapLine(ownerAddress);
            assertTrue(line == null || !line.contains("/memfd:" + name + " "), "still mapped after its arena closed: " + line);
            assertFalse(("/memfd:" + name + " (deleted)").equals(link(fd)), "fd " + fd + " still open");
            assertEquals(0, openDescriptorsOf(name), "a descriptor of the file is still open");
            assertEquals(1, mappingsOf(name), "the peer's mapping only");
            assertTrue(mapLine(peerAddress).endsWith("/memfd:" + name + " (deleted)"), mapLine(peerAddress));
            assertArrayEquals(pattern, mapped.toArray(ValueLayout.JAVA_BYTE), "the peer's pages outlive the owner's mapping");
        } finally {
            peer.close();
        }
        assertEquals(0, mappingsOf(name), "still mapped after the peer's arena closed");
        String line = mapLine(peerAddress);
        assertTrue(line == null || !line.contains("/memfd:" + name + " "), line);
    }

    @Test
    void theSendPoolOfASharingAllocatorIsSharedAndTheOtherPoolsAreNot() throws IOException {
        AllocatorConfig config = AllocatorConfig.defaults().withSlabBytes(1 << 20).withSharedSendPool(true);
        assertTrue(config.shareSendPool());
        List<Integer> slabFds = new ArrayList<>();
        int probeFd;
        String prefix;
        try (RegisteredAllocator allocator = new RegisteredAllocator(new CountingRegistrar(), config)) {
            assertTrue(allocator.sharesSendPool());
            prefix = allocator.sharedPrefix();
            probeFd = allocator.sharedProbeFd();
            assertEquals(prefix + "-7", allocator.sharedName(7));
            assertEquals(prefix + "-7", RegisteredAllocator.sharedName(prefix, 7));

            RegisteredBuffer first = allocator.tryAllocate(PoolKind.SEND, 4000);
            RegisteredBuffer second = allocator.tryAllocate(PoolKind.SEND, 300);
            try (Arena peer = Arena.ofConfined()) {
                for (RegisteredBuffer buffer : List.of(first, second)) {
                    assertNotNull(buffer);
                    int fd = buffer.sharedFd();
                    assertTrue(fd >= 0, "sharedFd " + fd);
                    assertTrue(buffer.slabIndex() >= 0, "slabIndex " + buffer.slabIndex());
                    long offset = buffer.slabOffset();
                    assertTrue(offset >= 0 && offset + buffer.capacity() <= config.slabBytes(), "slabOffset " + offset);
                    String slabName = allocator.sharedName(buffer.slabIndex());
                    assertEquals("/memfd:" + slabName + " (deleted)", link(fd));
                    slabFds.add(fd);

                    byte[] message = pattern(buffer.capacity(), buffer.slabIndex() * 31 + (int) offset);
                    MemorySegment.copy(message, 0, buffer.segment(), ValueLayout.JAVA_BYTE, 0, message.length);
                    MemorySegment slab = SharedMemory.mapPeer(peer, PID, fd, slabName, config.slabBytes());
                    assertArrayEquals(message, slab.asSlice(offset, buffer.capacity()).toArray(ValueLayout.JAVA_BYTE),
                            "the peer reads the buffer at its slab offset");

                    RegisteredBuffer view = buffer.retainedSlice(100, 150);
                    try {
                        assertEquals(fd, view.sharedFd());
                        assertEquals(buffer.slabIndex(), view.slabIndex());
                        assertEquals(offset + 100, view.slabOffset());
                        assertArrayEquals(java.util.Arrays.copyOfRange(message, 100, 250),
                                slab.asSlice(view.slabOffset(), 150).toArray(ValueLayout.JAVA_BYTE));
                    } finally {
                        view.release();
                    }
                }
                assertTrue(first.slabIndex() != second.slabIndex() || first.slabOffset() != second.slabOffset(),
                        "two buffers in one place");
            } finally {
                first.release();
                second.release();
            }

            for (PoolKind kind : new PoolKind[] {PoolKind.RECEIVE, PoolKind.RENDEZVOUS}) {
                RegisteredBuffer buffer = allocator.tryAllocate(kind, 4000);
                assertNotNull(buffer);
                try {
                    assertEquals(-1, buffer.sharedFd(), kind + " buffer is shared");
                    assertTrue(buffer.slabIndex() >= 0, kind + " slabIndex " + buffer.slabIndex());
                } finally {
                    buffer.release();
                }
            }
        }
        // The allocator's close closes its slabs' and its probe's descriptors.
        for (int fd : slabFds) {
            String link = link(fd);
            assertTrue(link == null || !link.startsWith("/memfd:" + prefix), "fd " + fd + " still open: " + link);
        }
        String link = link(probeFd);
        assertTrue(link == null || !link.startsWith("/memfd:" + prefix), "probe fd " + probeFd + " still open: " + link);
        assertEquals(0, mappingsOf(prefix), "a shared slab is still mapped after the allocator closed");
    }

    @Test
    void theDefaultAllocatorSharesNothing() {
        try (RegisteredAllocator allocator = new RegisteredAllocator(new CountingRegistrar(),
                AllocatorConfig.defaults().withSlabBytes(1 << 20))) {
            assertFalse(allocator.config().shareSendPool());
            assertFalse(allocator.sharesSendPool());
            assertNull(allocator.sharedPrefix());
            assertEquals(-1, allocator.sharedProbeFd());
            for (PoolKind kind : PoolKind.values()) {
                RegisteredBuffer buffer = allocator.tryAllocate(kind, 4000);
                assertNotNull(buffer);
                try {
                    assertEquals(-1, buffer.sharedFd(), kind + " buffer is shared");
                    assertTrue(buffer.slabIndex() >= 0);
                    assertTrue(buffer.slabOffset() >= 0);
                } finally {
                    buffer.release();
                }
            }
        }
    }

    // ---- helpers ----

    private static String uniqueName() {
        return "ferry-test-" + Long.toHexString(ThreadLocalRandom.current().nextLong() | 1L << 63);
    }

    private static byte[] pattern(long bytes, int seed) {
        byte[] b = new byte[(int) bytes];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) (i * 7 + seed + (i >>> 8));
        }
        return b;
    }

    /** What /proc/self/fd/{@code fd} links to, or null if that descriptor is not open. */
    private static String link(int fd) {
        try {
            return Files.readSymbolicLink(Path.of("/proc/self/fd/" + fd)).toString();
        } catch (IOException e) {
            return null;
        }
    }

    /** How many of this process's descriptors are the memfd named {@code name}. */
    private static long openDescriptorsOf(String name) throws IOException {
        String target = "/memfd:" + name + " (deleted)";
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            return fds.map(p -> link(Integer.parseInt(p.getFileName().toString()))).filter(target::equals).count();
        }
    }

    /** The descriptor of this process that links to {@code path}, or -1. */
    private static int descriptorLinkingTo(String path) throws IOException {
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            return fds.mapToInt(p -> Integer.parseInt(p.getFileName().toString()))
                    .filter(fd -> path.equals(link(fd))).findFirst().orElse(-1);
        }
    }

    /** A descriptor number well above any this process has open. */
    private static int notOpenDescriptor() throws IOException {
        int max;
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            max = fds.mapToInt(p -> Integer.parseInt(p.getFileName().toString())).max().orElse(0);
        }
        int fd = max + 1000;
        assertNull(link(fd));
        return fd;
    }

    /** The /proc/self/maps line of the mapping that covers {@code address}, or null. */
    private static String mapLine(long address) throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
            int dash = line.indexOf('-');
            int space = line.indexOf(' ');
            long start = Long.parseUnsignedLong(line.substring(0, dash), 16);
            long end = Long.parseUnsignedLong(line.substring(dash + 1, space), 16);
            if (Long.compareUnsigned(address, start) >= 0 && Long.compareUnsigned(address, end) < 0) {
                return line;
            }
        }
        return null;
    }

    /** The permissions ({@code rw-s}) of the mapping that covers {@code address}, or null. */
    private static String perms(long address) throws IOException {
        String line = mapLine(address);
        return line == null ? null : line.split(" +")[1];
    }

    /** How many mappings of memfds whose names start with {@code name} this process has. */
    private static long mappingsOf(String name) throws IOException {
        return Files.readAllLines(Path.of("/proc/self/maps")).stream()
                .filter(line -> line.contains("/memfd:" + name)).count();
    }

    /** A memfd of {@code bytes} that can be sealed but is not: made here, not through SharedMemory. */
    private static int unsealedMemfd(String name, long bytes) throws Throwable {
        Linker linker = Linker.nativeLinker();
        MethodHandle memfdCreate = linker.downcallHandle(linker.defaultLookup().find("memfd_create").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
        MethodHandle ftruncate = linker.downcallHandle(linker.defaultLookup().find("ftruncate").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG));
        try (Arena call = Arena.ofConfined()) {
            int fd = (int) memfdCreate.invokeExact(call.allocateFrom(name), 0x1 | 0x2);
            assertTrue(fd >= 0, "memfd_create failed");
            int result = (int) ftruncate.invokeExact(fd, bytes);
            assertEquals(0, result, "ftruncate failed");
            assertEquals("/memfd:" + name + " (deleted)", link(fd));
            return fd;
        }
    }

    private static void closeFd(int fd) throws Throwable {
        Linker linker = Linker.nativeLinker();
        MethodHandle close = linker.downcallHandle(linker.defaultLookup().find("close").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
        int ignored = (int) close.invokeExact(fd);
    }
}
