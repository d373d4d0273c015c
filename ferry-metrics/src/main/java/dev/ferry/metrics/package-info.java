/**
 * Ferry's counters as Micrometer meters, and a small HTTP endpoint that serves them in
 * Prometheus's text format with a readiness check.
 *
 * <p>{@link dev.ferry.metrics.FerryMetrics} binds transports, RPC clients and servers,
 * allocators and parameter servers to a {@code MeterRegistry} (the application's own, or a
 * Prometheus one it makes). Meters read the existing counters when scraped (function counters
 * and gauges over a snapshot taken at most every 100 ms), so the data path neither allocates nor
 * locks for them; RPC latencies go into pre-made timers through an
 * {@link dev.ferry.rpc.RpcObserver}. {@link dev.ferry.metrics.MetricsServer} serves
 * {@code /metrics} and {@code /healthz}. The names are listed in {@code docs/observability.md}.
 */
package dev.ferry.metrics;
