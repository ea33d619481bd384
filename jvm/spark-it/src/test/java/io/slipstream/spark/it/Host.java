package io.slipstream.spark.it;

import java.util.ArrayList;
import java.util.List;

/**
 * Where a process the tests start runs: the address Spark binds there ({@code SPARK_LOCAL_IP}, a Master's or
 * Worker's {@code --host}), and the command words that start a program there, put before the program's own.
 * {@link #LOOPBACK} is this machine as it is; {@link NetnsHosts} makes others.
 */
record Host(String address, List<String> launcher) {
    static final Host LOOPBACK = new Host("127.0.0.1", List.of());

    Host {
        launcher = List.copyOf(launcher);
    }

    /** {@code command} (program and arguments) as started on this host. */
    List<String> command(List<String> command) {
        List<String> placed = new ArrayList<>(launcher);
        placed.addAll(command);
        return placed;
    }
}
