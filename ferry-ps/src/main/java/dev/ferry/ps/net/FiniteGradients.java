package dev.ferry.ps.net;

import dev.ferry.ps.PsException;

/**
 * The client's check that a batch of gradients is finite before any of it is sent. Servers refuse
 * NaN and infinite gradients too, but each checks only its own part: a batch that spans servers
 * would be applied by some and refused by others. Checked first, such a batch changes nothing.
 */
final class FiniteGradients {

    private FiniteGradients() {
    }

    /**
     * Checks that every value of {@code gradients} ({@code ids.length} rows of {@code dimension})
     * is finite.
     *
     * @throws PsException {@code INVALID_ARGUMENT} naming the first offending value, its id, the
     *                     id's position in the batch and the element
     */
    static void check(String table, long[] ids, float[] gradients, int dimension) {
        for (int i = 0; i < gradients.length; i++) {
            if (!Float.isFinite(gradients[i])) {
                int position = i / dimension;
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "gradient " + gradients[i] + " for id "
                        + ids[position] + " (position " + position + " of " + ids.length + " in the batch, element "
                        + i % dimension + ") of table '" + table + "' is not finite; nothing of the batch was sent");
            }
        }
    }
}
