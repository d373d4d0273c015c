/**
 * RPC round trips between two processes on one host.
 *
 * <p>{@link dev.ferry.bench.rpc.RpcBenchmark#run} is the client: it starts
 * {@link dev.ferry.bench.rpc.RpcBenchServer} as a child process
 * ({@link dev.ferry.ps.net.ChildJvm}), learns its address over the
 * child's standard streams, warms up, then calls an echo method from one or more threads for a
 * fixed time, timing each call into an HdrHistogram. The result is a
 * {@link dev.ferry.bench.rpc.RpcBenchResult}: mean, p50, p99, p99.9 and calls per second, over a
 * fabric provider (shm, tcp) or the Netty kernel-TCP baseline.
 */
package dev.ferry.bench.rpc;
