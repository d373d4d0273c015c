package dev.ferry.memory;

/**
 * The bounded pools of an allocator. Each pool owns its slabs and its byte quota, so that a
 * send side that has filled its pool can never take memory that receives need.
 */
public enum PoolKind {
    /** Buffers that outgoing eager messages are encoded into. */
    SEND,
    /** Buffers posted to receive incoming eager messages. */
    RECEIVE,
    /** Buffers exposed to, or filled by, RDMA reads of large payloads. */
    RENDEZVOUS
}
