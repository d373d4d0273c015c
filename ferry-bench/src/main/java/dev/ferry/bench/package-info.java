/**
 * Benchmarks that reproduce the paper's experiments, each a program with HdrHistogram output
 * and a baseline in the same run: {@link dev.ferry.bench.pingpong} for round-trip latency over
 * libfabric and over the Netty kernel-TCP transport; {@code dev.ferry.bench.jmh} for JMH
 * micro-benchmarks.
 */
package dev.ferry.bench;
