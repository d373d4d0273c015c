package dev.ferry.fabric;

/** libfabric endpoint types Ferry drives. */
public enum EndpointType {
    /** Any type: let the provider choose. */
    UNSPEC(0),
    /** Connected, reliable: one queue pair per connection (verbs, tcp). */
    MSG(1),
    /** Unreliable datagrams (udp, efa): listed by discovery, not driven by Ferry. */
    DGRAM(2),
    /** Reliable and connectionless, addressed through an address vector (shm, efa, rxm). */
    RDM(3),
    /** Socket-like streams: listed by discovery, not driven by Ferry. */
    SOCK_STREAM(4),
    /** Socket-like datagrams: listed by discovery, not driven by Ferry. */
    SOCK_DGRAM(5);

    final int code;

    EndpointType(int code) {
        this.code = code;
    }

    static EndpointType of(int code) {
        for (EndpointType t : values()) {
            if (t.code == code) {
                return t;
            }
        }
        throw new FabricException("unsupported endpoint type " + code);
    }
}
