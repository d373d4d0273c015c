/** Requests and responses over a transport: ids, deadlines, typed remote errors, and recovery. */
package dev.ferry.rpc;
