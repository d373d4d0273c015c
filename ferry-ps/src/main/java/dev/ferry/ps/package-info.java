/**
 * The parameter server's storage and math: sharded embedding tables and dense tensors, pull and
 * push, server-side optimizers, routing helpers and checkpoints.
 *
 * <p>Server side: a {@link dev.ferry.ps.ParameterServer} holds
 * {@link dev.ferry.ps.SparseTable}s (int64 id to a row of f32 weights with the
 * {@link dev.ferry.ps.Optimizer}'s state inline, off-heap, in lock-striped open-addressing hash
 * tables) and {@link dev.ferry.ps.DenseTensor}s. Pulls gather rows straight into a
 * caller-supplied {@link java.lang.foreign.MemorySegment} (the registered response buffer);
 * pushes read gradients from one (the registered request buffer). Rows are created on first
 * use by an {@link dev.ferry.ps.Initializer} that depends only on (seed, id). Checkpoints are
 * verified block files (CRC32C) renamed into place when complete; a server restores from the
 * newest one that verifies, and can serve one read-only.
 *
 * <p>Client side: {@link dev.ferry.ps.Slots} hashes ids into 65,536 virtual slots, a
 * {@link dev.ferry.ps.SlotTable} maps slots to servers, and a {@link dev.ferry.ps.BatchPlan}
 * dedupes a batch, splits it by server and puts the answers back in the caller's order.
 *
 * <p>Errors are {@link dev.ferry.ps.PsException}s with a {@link dev.ferry.ps.PsException.Code};
 * a bad request is refused before it changes anything.
 */
package dev.ferry.ps;
