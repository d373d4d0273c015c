/**
 * libfabric through Java's Foreign Function &amp; Memory API, with no C code.
 *
 * <p>{@link dev.ferry.fabric.InfoList#query} discovers providers; {@link dev.ferry.fabric.Fabric},
 * {@link dev.ferry.fabric.Domain}, {@link dev.ferry.fabric.EventQueue},
 * {@link dev.ferry.fabric.CompletionQueue}, {@link dev.ferry.fabric.AddressVector},
 * {@link dev.ferry.fabric.MemoryRegion}, {@link dev.ferry.fabric.Endpoint},
 * {@link dev.ferry.fabric.SharedReceiveContext} and {@link dev.ferry.fabric.PassiveEndpoint} wrap
 * the native objects. Closing an object closes what
 * was opened from it first, so teardown order is always valid. Errors throw
 * {@link dev.ferry.fabric.FabricException}; a full queue on the data path is a {@code false}
 * return (back-pressure), not an exception.
 */
package dev.ferry.fabric;
