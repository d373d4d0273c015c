/**
 * {@code ferry stat}: a live view of servers from their {@code /metrics} endpoints. Two scrapes a
 * second apart give rates and the latency quantiles of that second (from histogram bucket
 * deltas); {@link dev.ferry.metrics.stat.StatView} draws them as a table or JSON.
 */
package dev.ferry.metrics.stat;
