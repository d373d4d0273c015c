/**
 * JMH benchmarks of the parameter server's own work, one process, one thread, no network:
 * planning a batch, gathering rows, optimizer steps, summing duplicate gradients, scattering
 * rows, and the whole in-process fetch and push. Each benchmark reports time per id, per row or
 * per element ({@code @OperationsPerInvocation}) beside a plain {@code MemorySegment.copy} of the
 * same bytes, the memory-speed limit. {@link dev.ferry.microbench.MicroBench} runs them and
 * prints the table with GB/s.
 */
package dev.ferry.microbench;
