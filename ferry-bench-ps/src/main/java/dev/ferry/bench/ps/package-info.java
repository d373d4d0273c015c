/**
 * The parameter-server benchmarks: {@code fetch} (inference: batches of ids pulled
 * from sharded servers) and {@code push} (training: gradient batches pushed by many workers in
 * synchronized steps, an incast), each run on Ferry's transports ({@code shm}, {@code tcp},
 * {@code netty}) and on a gRPC-java baseline ({@code grpc}) in one invocation.
 *
 * <pre>
 *   driver (FetchBenchmark / PushBenchmark)      lines over stdin/stdout of each child
 *     |-- PsBenchServer x S   ParameterServer behind Ferry RPC or a gRPC server
 *     '-- PsBenchWorker x P   client threads: PsBenchClient, routed with BatchPlan
 * </pre>
 *
 * Every process is a child JVM, so the CPU time of each one can be read from
 * {@code /proc/<pid>/stat} and a transport's run does not inherit the previous one's JIT state.
 */
package dev.ferry.bench.ps;
