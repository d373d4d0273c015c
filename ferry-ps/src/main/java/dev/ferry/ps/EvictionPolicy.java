package dev.ferry.ps;

/**
 * Which rows a table over its {@link Eviction#capacity()} deletes first. Both orders are total:
 * ties fall to the next key, and last to the smaller id.
 */
public enum EvictionPolicy {
    /** The oldest last update first (a push's step, or the row's creation), then the smaller id. */
    LEAST_RECENTLY_UPDATED(0),
    /** The fewest optimizer steps first (the row's step count), then the oldest last update, then the smaller id. */
    LEAST_FREQUENTLY_USED(1);

    private final int code;

    EvictionPolicy(int code) {
        this.code = code;
    }

    /** Its code in checkpoints. */
    int code() {
        return code;
    }

    /**
     * The policy of a code.
     *
     * @throws PsException {@code INVALID_ARGUMENT} for an unknown code
     */
    static EvictionPolicy ofCode(int code) {
        for (EvictionPolicy p : values()) {
            if (p.code == code) {
                return p;
            }
        }
        throw TableConfig.invalid("unknown eviction policy code " + code);
    }
}
