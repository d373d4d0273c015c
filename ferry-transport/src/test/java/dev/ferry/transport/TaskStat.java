package dev.ferry.transport;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/** This process's threads as the kernel sees them ({@code /proc/self/task}), for tests of thread settings. */
public final class TaskStat {

    private TaskStat() {
    }

    /** The kernel thread id of the calling thread. */
    public static long currentTid() throws IOException {
        return Long.parseLong(Path.of("/proc/thread-self").toRealPath().getFileName().toString());
    }

    /** The kernel's nice value of thread {@code tid} of this process: field 19 of its stat line. */
    public static int niceOf(long tid) throws IOException {
        String stat = Files.readString(Path.of("/proc/self/task/" + tid + "/stat"));
        return Integer.parseInt(stat.substring(stat.lastIndexOf(')') + 2).split(" ")[16]);
    }

    /** This process's threads whose name starts with {@code prefix}, by kernel thread id. */
    public static List<Long> tidsNamed(String prefix) throws IOException {
        List<Long> tids = new ArrayList<>();
        try (Stream<Path> tasks = Files.list(Path.of("/proc/self/task"))) {
            for (Path task : (Iterable<Path>) tasks::iterator) {
                try {
                    if (Files.readString(task.resolve("comm")).startsWith(prefix)) {
                        tids.add(Long.parseLong(task.getFileName().toString()));
                    }
                } catch (IOException gone) {
                    // the thread ended meanwhile
                }
            }
        }
        return tids;
    }
}
