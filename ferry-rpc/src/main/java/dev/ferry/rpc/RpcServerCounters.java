package dev.ferry.rpc;

/**
 * A snapshot of a server's counters, totals since it opened.
 *
 * @param requests request frames received (retries included)
 * @param executions handler runs
 * @param replays retries of completed non-idempotent calls answered from the stored outcome
 * @param duplicatesWhileRunning retries that arrived while the first run was still going
 * @param outcomesLost retries refused because their outcome had been trimmed or evicted
 * @param handlerErrors handler runs that threw
 * @param deadlinesMissed requests whose deadline passed before their handler started
 * @param refusals peers refused at authentication
 * @param sessions sessions opened (authenticated)
 * @param dedupeEntries entries in the deduplication table now
 */
public record RpcServerCounters(
        long requests,
        long executions,
        long replays,
        long duplicatesWhileRunning,
        long outcomesLost,
        long handlerErrors,
        long deadlinesMissed,
        long refusals,
        long sessions,
        long dedupeEntries) {
}
