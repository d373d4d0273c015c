package dev.ferry.fabric;

/** libfabric endpoint types Ferry drives. */
public enum EndpointType {
    /** Any type: let the provider choose. */
    UNSPEC(0),
    /** Connected, reliable: one queue pair per connection (verbs, tcp). */
    MSG(1),
    /** Reliable and connectionless, addressed through an address vector (shm, efa, rxm). */
    RDM(3);

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
