/**
 * The parameter-server demo and benchmark: {@link dev.ferry.bench.ps.PsDemo} starts a local
 * cluster of server processes and measures inference fetches (pulls) and training pushes of
 * Zipf-distributed ids ({@link dev.ferry.bench.ps.ZipfSampler}) on Ferry's shm transport and on
 * the Netty kernel-TCP baseline, with HdrHistogram latencies.
 */
package dev.ferry.bench.ps;
