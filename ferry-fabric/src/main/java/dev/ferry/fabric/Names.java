package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/** {@code fi_getname} for active and passive endpoints. */
final class Names {

    private Names() {
    }

    static byte[] getName(long fid, long cmOps) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment len = arena.allocateFrom(JAVA_LONG, 256);
            MemorySegment buf = arena.allocate(256);
            int rc = (int) LibFabric.I_JJJ.invokeExact(LibFabric.function(cmOps, InfoDescriptor.CM_GETNAME), fid,
                    buf.address(), len.address());
            if (rc == -257 /* FI_ETOOSMALL */) {
                buf = arena.allocate(len.get(JAVA_LONG, 0));
                rc = (int) LibFabric.I_JJJ.invokeExact(LibFabric.function(cmOps, InfoDescriptor.CM_GETNAME), fid,
                        buf.address(), len.address());
            }
            LibFabric.check(rc, "fi_getname");
            return buf.asSlice(0, len.get(JAVA_LONG, 0)).toArray(JAVA_BYTE);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }
}
