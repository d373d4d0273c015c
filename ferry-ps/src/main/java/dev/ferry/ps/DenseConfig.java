package dev.ferry.ps;

import java.util.Objects;

/**
 * A dense tensor: {@code length} f32 weights updated as a whole by one optimizer step per push
 * (a dense layer's weights, a bias). A tensor is pushed whole, so one larger than
 * {@link PsConfig#maxRequestBytes()} must be split into several tensors by its owner.
 *
 * @param name        unique per server among tables and tensors; 1 to 200 characters
 * @param length      weights, 1 to 2^28
 * @param optimizer   the update rule
 * @param initializer the initial weights: element {@code j} is {@code initializer.valueAt(0, j)}
 */
public record DenseConfig(String name, int length, Optimizer optimizer, Initializer initializer) {

    /** The largest {@link #length()}: 1 GiB of weights. */
    public static final int MAX_LENGTH = 1 << 28;

    /** Checks the values. */
    public DenseConfig {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(optimizer, "optimizer");
        Objects.requireNonNull(initializer, "initializer");
        TableConfig.checkName(name);
        if (length < 1 || length > MAX_LENGTH) {
            throw TableConfig.invalid("length must be in [1, " + MAX_LENGTH + "]: " + length);
        }
    }

    /** Bytes the tensor takes, optimizer state included. */
    public long bytes() {
        return RowLayout.rowBytes(length, optimizer.stateSlots());
    }
}
