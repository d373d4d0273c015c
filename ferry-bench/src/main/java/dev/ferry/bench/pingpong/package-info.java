/**
 * Round-trip latency between two processes on one host.
 *
 * <p>{@link dev.ferry.bench.pingpong.PingPong#run} is the client: it starts the server as a
 * child process ({@link dev.ferry.ps.net.ChildJvm}), exchanges addresses with it
 * over the child's standard streams ({@link dev.ferry.bench.pingpong.ControlLine}), times each
 * round trip into an HdrHistogram and returns a {@link dev.ferry.bench.pingpong.PingPongResult}.
 * The fabric variant ({@link dev.ferry.bench.pingpong.FabricPingPong}) drives libfabric directly:
 * receives posted ahead, inject for small messages, the completion queue busy-polled, nothing
 * allocated per message. The Netty variant ({@link dev.ferry.bench.pingpong.NettyPingPong}) is
 * the kernel-TCP baseline through the transport API. {@link dev.ferry.bench.pingpong.CPingPong}
 * runs libfabric's own C {@code fi_pingpong} for comparison.
 */
package dev.ferry.bench.pingpong;
