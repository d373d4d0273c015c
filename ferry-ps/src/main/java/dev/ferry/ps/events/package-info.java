/**
 * Flight-recorder ({@code jdk.jfr}) events of the parameter server: checkpoints written and
 * restored (or rejected), with their size and how long they took.
 * {@link dev.ferry.ps.events.PsEvents} is the only entry. Names are {@code dev.ferry.ps.*};
 * see {@code docs/observability.md}.
 */
package dev.ferry.ps.events;
