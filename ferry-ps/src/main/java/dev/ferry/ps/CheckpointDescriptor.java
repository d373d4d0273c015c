package dev.ferry.ps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.zip.CRC32C;

/**
 * The on-disk layout of a checkpoint, and the reading and writing of its block files.
 *
 * <pre>
 *  &lt;dir&gt;/checkpoint-00000007/        complete checkpoints, highest sequence newest
 *          MANIFEST                   configs, slot table, and per file: name, rows, bytes, CRC32C
 *          t0-s0.rows ... t0-s15.rows one file per table shard: its rows, byte for byte
 *          d0.dense                   one file per dense tensor: its row
 *  &lt;dir&gt;/checkpoint-00000008.tmp/    being written (or left by a crash); never read
 *
 *  every file (little-endian):
 *  +------------------+-------------+-----------+
 *  | magic "FERRYPS1" | version i32 | kind i32  |                    header, 16 bytes
 *  +------------------+-------------+-----------+
 *  | length i32 > 0   | crc32c i32  | payload[length] |              blocks, payload <= 1 MiB
 *  +------------------+-------------+-----------------+
 *  | 0 i32            | blocks i32  |                                end marker
 *  +------------------+-------------+
 * </pre>
 * The payloads of a file, concatenated, are its content: rows ({@link RowLayout}) or the manifest
 * (a {@link java.io.DataOutput} record, see {@code Checkpoints}). Each block carries the CRC32C
 * of its payload; the manifest adds each file's size and whole-file CRC32C, so a truncated,
 * swapped or corrupt file is found before anything is loaded. A checkpoint is written in its
 * {@code .tmp} directory, each file forced to disk, and then renamed atomically.
 */
final class CheckpointDescriptor {

    static final long MAGIC = 0x315350595252_4546L; // "FERRYPS1" read as little-endian bytes
    static final int VERSION = 1;
    /**
     * The manifest's content version ({@code Checkpoints}): 2 adds each table's pull format,
     * admission rule and eviction; 3 adds the live export's stamp ({@link ExportStamp}) after the
     * sequence; versions 1 and 2 are still read. The block files keep {@link #VERSION}.
     */
    static final int MANIFEST_VERSION = 3;
    static final int KIND_MANIFEST = 1;
    static final int KIND_ROWS = 2;
    static final int KIND_DENSE = 3;
    static final int HEADER_BYTES = 16;
    static final int BLOCK_HEADER_BYTES = 8;
    static final int MAX_BLOCK_BYTES = 1 << 20;
    static final String MANIFEST = "MANIFEST";
    static final String PREFIX = "checkpoint-";
    static final String TMP_SUFFIX = ".tmp";

    private CheckpointDescriptor() {
    }

    /** Size and whole-file CRC32C of a written file. */
    record FileSummary(long bytes, int crc) {
    }

    /** Writes {@code content} as a block file and forces it to disk. */
    static FileSummary write(Path path, int kind, MemorySegment content) throws IOException {
        CRC32C fileCrc = new CRC32C();
        long written = 0;
        try (FileChannel channel = FileChannel.open(path, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            ByteBuffer header = ByteBuffer.allocate(HEADER_BYTES).order(ByteOrder.LITTLE_ENDIAN);
            header.putLong(MAGIC).putInt(VERSION).putInt(kind).flip();
            written += put(channel, header, fileCrc);
            int blocks = 0;
            ByteBuffer blockHeader = ByteBuffer.allocate(BLOCK_HEADER_BYTES).order(ByteOrder.LITTLE_ENDIAN);
            for (long at = 0; at < content.byteSize(); at += MAX_BLOCK_BYTES) {
                int length = (int) Math.min(MAX_BLOCK_BYTES, content.byteSize() - at);
                ByteBuffer payload = content.asSlice(at, length).asByteBuffer();
                CRC32C crc = new CRC32C();
                crc.update(payload.duplicate());
                blockHeader.clear();
                blockHeader.putInt(length).putInt((int) crc.getValue()).flip();
                written += put(channel, blockHeader, fileCrc);
                written += put(channel, payload, fileCrc);
                blocks++;
            }
            blockHeader.clear();
            blockHeader.putInt(0).putInt(blocks).flip();
            written += put(channel, blockHeader, fileCrc);
            channel.force(true);
        }
        return new FileSummary(written, (int) fileCrc.getValue());
    }

    /**
     * Reads a block file, checking its size and CRC32C against the manifest's (when
     * {@code expected} is not null), its header, every block's CRC32C and its end marker.
     *
     * @return its content, allocated from {@code arena}
     * @throws PsException {@code CHECKPOINT_CORRUPT} naming the file and what is wrong
     */
    static MemorySegment read(Path path, int kind, FileSummary expected, Arena arena, String source)
            throws IOException {
        if (!Files.isRegularFile(path)) {
            throw SparseTable.corrupt(source, "missing");
        }
        long size = Files.size(path);
        if (expected != null && size != expected.bytes()) {
            throw SparseTable.corrupt(source, (size < expected.bytes() ? "truncated: " : "wrong size: ") + size
                    + " bytes, the manifest says " + expected.bytes());
        }
        try (Arena mapping = Arena.ofConfined(); FileChannel channel = FileChannel.open(path, StandardOpenOption.READ)) {
            MemorySegment file = channel.map(FileChannel.MapMode.READ_ONLY, 0, size, mapping);
            if (size < HEADER_BYTES + BLOCK_HEADER_BYTES) {
                throw SparseTable.corrupt(source, "truncated: " + size + " bytes");
            }
            if (file.get(RowLayout.LONG, 0) != MAGIC) {
                throw SparseTable.corrupt(source, "not a Ferry checkpoint file (bad magic)");
            }
            int version = file.get(INT, 8);
            int fileKind = file.get(INT, 12);
            if (version != VERSION || fileKind != kind) {
                throw SparseTable.corrupt(source, "version " + version + " kind " + fileKind + ", expected version "
                        + VERSION + " kind " + kind);
            }
            // First pass: check blocks and find the content size.
            long at = HEADER_BYTES;
            long contentBytes = 0;
            int blocks = 0;
            while (true) {
                if (at + BLOCK_HEADER_BYTES > size) {
                    throw SparseTable.corrupt(source, "truncated after block " + blocks + " (no end marker)");
                }
                int length = file.get(INT, at);
                int crc = file.get(INT, at + 4);
                if (length == 0) {
                    if (crc != blocks) {
                        throw SparseTable.corrupt(source, "end marker counts " + crc + " blocks, found " + blocks);
                    }
                    if (at + BLOCK_HEADER_BYTES != size) {
                        throw SparseTable.corrupt(source, (size - at - BLOCK_HEADER_BYTES) + " bytes after the end marker");
                    }
                    break;
                }
                if (length < 0 || length > MAX_BLOCK_BYTES || at + BLOCK_HEADER_BYTES + length > size) {
                    throw SparseTable.corrupt(source, "block " + blocks + " at byte " + at + " has length " + length
                            + (length > 0 && length <= MAX_BLOCK_BYTES ? " past the end of the file (truncated)" : ""));
                }
                CRC32C actual = new CRC32C();
                actual.update(file.asSlice(at + BLOCK_HEADER_BYTES, length).asByteBuffer());
                if ((int) actual.getValue() != crc) {
                    throw SparseTable.corrupt(source, String.format("block %d at byte %d: CRC32C %08x, stored %08x",
                            blocks, at, (int) actual.getValue(), crc));
                }
                contentBytes += length;
                blocks++;
                at += BLOCK_HEADER_BYTES + length;
            }
            // Blocks first (their errors say where); then the whole file, which also covers headers.
            if (expected != null) {
                CRC32C crc = new CRC32C();
                crc.update(file.asByteBuffer());
                if ((int) crc.getValue() != expected.crc()) {
                    throw SparseTable.corrupt(source, String.format("file CRC32C is %08x, the manifest says %08x",
                            (int) crc.getValue(), expected.crc()));
                }
            }
            MemorySegment content = arena.allocate(Math.max(1, contentBytes), Long.BYTES).asSlice(0, contentBytes);
            long to = 0;
            for (at = HEADER_BYTES; to < contentBytes; ) {
                int length = file.get(INT, at);
                MemorySegment.copy(file, at + BLOCK_HEADER_BYTES, content, to, length);
                to += length;
                at += BLOCK_HEADER_BYTES + length;
            }
            return content;
        }
    }

    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private static long put(FileChannel channel, ByteBuffer buffer, CRC32C fileCrc) throws IOException {
        fileCrc.update(buffer.duplicate());
        long n = buffer.remaining();
        while (buffer.hasRemaining()) {
            channel.write(buffer);
        }
        return n;
    }
}
