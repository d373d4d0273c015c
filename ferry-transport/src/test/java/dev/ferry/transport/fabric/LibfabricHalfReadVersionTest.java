package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Which libfabric versions {@link LinkTeardown} tells operators about (the tcp provider's half-read bug). */
class LibfabricHalfReadVersionTest {

    @Test
    void versionsUpTo117MayHaveTheBug() {
        assertTrue(LinkTeardown.mayDoubleCompleteReads("1.17"));
        assertTrue(LinkTeardown.mayDoubleCompleteReads("1.11"));
        assertTrue(LinkTeardown.mayDoubleCompleteReads("0.9"));
    }

    @Test
    void versionsFrom118HaveTheFix() {
        assertFalse(LinkTeardown.mayDoubleCompleteReads("1.18"));
        assertFalse(LinkTeardown.mayDoubleCompleteReads("1.22"));
        assertFalse(LinkTeardown.mayDoubleCompleteReads("2.0"));
    }

    @Test
    void anUnreadableVersionIsTreatedAsAffected() {
        assertTrue(LinkTeardown.mayDoubleCompleteReads("unknown"));
        assertTrue(LinkTeardown.mayDoubleCompleteReads(""));
    }
}
