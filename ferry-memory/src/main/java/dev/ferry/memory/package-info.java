/**
 * The RDMA-aware allocator: registered off-heap slabs carved into size classes, per-thread
 * caches, reference-counted zero-copy buffers, bounded pools for send, receive and rendezvous
 * memory, and a registration cache for memory too large for a slab.
 *
 * <p>Entry points: {@link dev.ferry.memory.RegisteredAllocator} hands out
 * {@link dev.ferry.memory.RegisteredBuffer}s; {@link dev.ferry.memory.RegistrationCache}
 * registers application memory for zero-copy rendezvous; {@link dev.ferry.memory.MemoryRegistrar}
 * is the seam to the fabric.
 */
package dev.ferry.memory;
