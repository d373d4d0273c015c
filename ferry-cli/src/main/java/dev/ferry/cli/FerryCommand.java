package dev.ferry.cli;

import java.io.PrintWriter;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/** {@code ferry}: the launcher's entry point. */
@Command(name = "ferry",
        mixinStandardHelpOptions = true,
        version = "ferry 0.1.0-SNAPSHOT",
        description = "Ferry: a JVM communication layer over RDMA-class fabrics (libfabric), and a parameter server on it.",
        subcommands = {BenchCommand.class, ClusterCommand.class, DemoCommand.class, ServerCommand.class,
                StatCommand.class,
                CommandLine.HelpCommand.class},
        footer = {"", "Examples:",
                "  ferry demo",
                "  ferry bench pingpong --provider shm --size 64 --iterations 20000",
                "  ferry bench pingpong --provider tcp --endpoint rdm --size 4k --json",
                "  ferry bench pingpong --provider netty --size 64",
                "  ferry bench pingpong --provider tcp --compare-c"})
public final class FerryCommand implements Runnable {

    /** Exit status for bad input, as picocli uses it. */
    static final int USAGE = CommandLine.ExitCode.USAGE;
    /** Exit status for a failure while running. */
    static final int FAILED = CommandLine.ExitCode.SOFTWARE;

    @Spec
    private CommandSpec spec;

    @Override
    public void run() {
        throw new ParameterException(spec.commandLine(), "missing command: bench, cluster, demo, server or stat");
    }

    /** Runs the command line and exits with its status. */
    public static void main(String[] args) {
        System.exit(commandLine().execute(args));
    }

    /** The command line with Ferry's error handling: one line per error, 2 for bad input, 1 for failures. */
    public static CommandLine commandLine() {
        CommandLine cl = new CommandLine(new FerryCommand());
        cl.setParameterExceptionHandler((e, args) -> {
            CommandLine at = e.getCommandLine();
            PrintWriter err = at.getErr();
            err.println(at.getCommandSpec().qualifiedName() + ": " + e.getMessage()
                    + " (see " + at.getCommandSpec().qualifiedName() + " --help)");
            err.flush();
            return USAGE;
        });
        cl.setExecutionExceptionHandler((e, at, parsed) -> {
            PrintWriter err = at.getErr();
            err.println(at.getCommandSpec().qualifiedName() + ": " + message(e));
            err.flush();
            if (System.getenv("FERRY_DEBUG") != null) {
                e.printStackTrace(err);
            }
            return FAILED;
        });
        return cl;
    }

    /** An exception's message on one line, or its class name when it has none. */
    static String message(Throwable t) {
        String m = t.getMessage();
        if (m == null || m.isBlank()) {
            m = t.getClass().getSimpleName();
        }
        return m.replace('\n', ' ').replace('\r', ' ');
    }
}
