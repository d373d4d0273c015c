package dev.ferry.ps;

/** {@code -Dferry.test.scale}: {@code ci} (default) or {@code full} (under -Pfull). */
final class TestScale {

    private TestScale() {
    }

    static boolean full() {
        return "full".equals(System.getProperty("ferry.test.scale", "ci"));
    }

    static int pick(int ci, int full) {
        return full() ? full : ci;
    }
}
