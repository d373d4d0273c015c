/*
 * Software prefetch for the parameter server's gathers and pushes (dev.ferry.ps.LinePrefetch).
 *
 * Java has no prefetch instruction: a load that misses holds its place in the processor's
 * reorder window until its line arrives, so a loop of touches keeps only as many misses under
 * way as the first-level cache's miss buffers allow, and work placed after the touches waits for
 * them. A prefetch retires at once; one into the second level (prefetcht1 on x86-64, PRFM
 * PLDL2KEEP on AArch64) keeps many more lines under way and lets the work go on meanwhile.
 *
 * A prefetch never faults: an address that is unmapped, freed or not canonical is ignored by the
 * processor, so callers may pass addresses read without a lock.
 */
#include <stdint.h>

/*
 * spans holds n pairs (address, lines): one prefetch per 64-byte line of each span.
 * Called from Java through a critical downcall with a heap long[] (no copy, no safepoint).
 */
void ferry_prefetch_l2(const int64_t *spans, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        const char *at = (const char *) (intptr_t) spans[2 * i];
        int64_t lines = spans[2 * i + 1];
        for (int64_t l = 0; l < lines; l++) {
            __builtin_prefetch(at + 64 * l, 0, 2);
        }
    }
}
