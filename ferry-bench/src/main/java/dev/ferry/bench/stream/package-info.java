/**
 * One-way streams between two processes on one host: throughput and per-message latency.
 *
 * <p>{@link dev.ferry.bench.stream.StreamBenchmark#run} is the sending side. It starts the
 * receiving side as a child JVM ({@link dev.ferry.ps.net.ChildJvm} running
 * {@link dev.ferry.bench.stream.StreamServer}), learns its address from the child's standard
 * output, streams messages of one size at it with a fixed number in flight, and returns a
 * {@link dev.ferry.bench.stream.StreamResult}: messages and MiB per second, HdrHistogram
 * latencies from {@code send} to its completion, and the flow-control counters of both sides.
 *
 * <p>Two implementations are measured the same way, so their ratio is Ferry's overhead:
 * <ul>
 *   <li>{@link dev.ferry.bench.stream.TransportStream}: Ferry's transport API (fabric providers
 *       with credits, send window, eager and rendezvous; or the Netty baseline);</li>
 *   <li>{@link dev.ferry.bench.stream.RawStream}: the raw libfabric binding with receives posted
 *       ahead and credits kept by the benchmark itself, the ceiling for a provider.</li>
 * </ul>
 * {@link dev.ferry.bench.stream.StreamSweep} runs both over a range of sizes and prints their ratios.
 */
package dev.ferry.bench.stream;
