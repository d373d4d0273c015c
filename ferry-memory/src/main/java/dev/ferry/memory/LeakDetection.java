package dev.ferry.memory;

/** How hard the allocator looks for buffers that were dropped without being released. */
public enum LeakDetection {
    /** No tracking at all. */
    DISABLED,
    /**
     * Every leaked buffer is reported, at no cost per allocation; one allocation in
     * {@link AllocatorConfig#leakSampleInterval()} also records its call stack, so the report of
     * a sampled buffer names where it was allocated. The production setting.
     */
    SAMPLED,
    /**
     * Every allocation records its call stack, and buffer objects are never reused, so every
     * use after release and every double release is caught, even long after the fact. For tests:
     * it allocates on every call.
     */
    PARANOID
}
