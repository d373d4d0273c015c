/**
 * The {@code bin/ferry} command line: {@link dev.ferry.cli.FerryCommand} and its subcommands,
 * thin picocli front ends over the benchmarks in {@code dev.ferry.bench}. Bad input is a
 * one-line error and exit status 2; a failure while running is a one-line error and status 1.
 */
package dev.ferry.cli;
