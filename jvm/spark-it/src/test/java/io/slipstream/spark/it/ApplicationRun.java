package io.slipstream.spark.it;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * One run of {@link ScenarioApp} as a separate driver JVM on a Spark home, and what it printed. Everything the run
 * writes stays in its own folder under target/: the driver's output ({@code driver.log}), the executors' logs
 * (through a private SPARK_HOME whose {@code jars} links to the real home's: local-cluster's workers write to
 * {@code SPARK_HOME/work}) and Spark's local directories.
 */
final class ApplicationRun {

    /** Generous for one application (35 to 90 s here), short enough that a hang fails the build in bounded time. */
    static final Duration TIMEOUT = Duration.ofMinutes(5);
    static final int LOG_TAIL_LINES = 60;
    /**
     * The driver's and executors' JVMs here live a minute or less: C1 alone and the serial collector start them
     * with less CPU than C2 and G1 on a machine of two cores (docs/testing.md has the measurement); a standalone
     * cluster's Master and Workers get them too. The system property of this name replaces them (empty: the JVM's
     * defaults).
     */
    static final String JVM_OPTS_PROPERTY = "slipstream.it.jvmOpts";
    static final String JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC";

    /** The options of {@link #JVM_OPTS_PROPERTY}, or {@link #JVM_OPTS}, as words (none for the JVM's defaults). */
    static List<String> jvmOpts() {
        String jvmOpts = System.getProperty(JVM_OPTS_PROPERTY, JVM_OPTS).trim();
        return jvmOpts.isEmpty() ? List.of() : List.of(jvmOpts.split("\\s+"));
    }

    final String name;
    final Path folder;
    final boolean timedOut;
    final int exitStatus;
    final long elapsedMs;
    final List<String> lines;
    final Map<String, String> facts = new HashMap<>();
    final Map<String, Outcome> results = new LinkedHashMap<>();
    final Map<String, String> failures = new LinkedHashMap<>();
    final Map<String, Long> timesMs = new HashMap<>();
    final Map<String, Long> metrics = new HashMap<>();
    /** "scenario metric" to value. */
    final Map<String, Long> scenarioMetrics = new HashMap<>();

    private ApplicationRun(String name, Path folder, boolean timedOut, int exitStatus, long elapsedMs,
            List<String> lines) {
        this.name = name;
        this.folder = folder;
        this.timedOut = timedOut;
        this.exitStatus = exitStatus;
        this.elapsedMs = elapsedMs;
        this.lines = lines;
        for (String line : lines) {
            String[] words = line.split(" ");
            switch (words[0]) {
                case "SPARK_VERSION", "SHUFFLE_MANAGER", "EXECUTOR_SHUFFLE_MANAGER" -> facts.put(words[0], words[1]);
                case "RESULT" -> results.put(words[1], Outcome.parse(words[2], words[3]));
                case "FAILED" -> failures.put(words[1], line);
                case "TIME" -> timesMs.put(words[1], Long.parseLong(words[2]));
                case "METRIC" -> metrics.put(words[1], Long.parseLong(words[2]));
                case "SCENARIO_METRIC" -> scenarioMetrics.put(words[1] + " " + words[2], Long.parseLong(words[3]));
                case "FABRIC_COUNTERS" -> {
                    metrics.put("fabricRemoteBytes", Long.parseLong(words[1]));
                    metrics.put("fabricRemoteBlocks", Long.parseLong(words[2]));
                    metrics.put("fabricCountingExecutors", Long.parseLong(words[3]));
                    metrics.put("fabricProbedExecutors", Long.parseLong(words[4]));
                    metrics.put("fabricPoolPeakBytes", Long.parseLong(words[5]));
                }
                case "FABRIC_COUNTERS_BEFORE" -> {
                    metrics.put("fabricRemoteBytesBefore " + words[1], Long.parseLong(words[2]));
                    metrics.put("fabricRemoteBlocksBefore " + words[1], Long.parseLong(words[3]));
                    metrics.put("fabricCountingExecutorsBefore " + words[1], Long.parseLong(words[4]));
                }
                default -> {
                }
            }
        }
    }

    /**
     * Starts the driver with the home's jars and the scenario application's classes (plus {@code extraClassPath},
     * e.g. the plugin jar) on its class path, runs {@code scenarios} (all when empty), waits for it up to
     * {@link #TIMEOUT}, and kills it and its executors if it takes longer.
     */
    static ApplicationRun start(String name, SparkHome home, List<Path> extraClassPath, Map<String, String> conf,
            List<String> scenarios) throws Exception {
        return start(name, home, Host.LOOPBACK, extraClassPath, conf, scenarios, List.of());
    }

    /**
     * As above, the driver on {@code host} (bound to its address), with {@code arguments} after the scenarios (e.g.
     * {@code --fabric-counters-before executorLoss}).
     */
    static ApplicationRun start(String name, SparkHome home, Host host, List<Path> extraClassPath, Map<String, String> conf,
            List<String> scenarios, List<String> arguments) throws Exception {
        Path folder = Path.of(System.getProperty("slipstream.it.workDir", "target/spark-it")).resolve(name);
        deleteRecursively(folder);
        Path privateHome = folder.resolve("home");
        Files.createDirectories(privateHome);
        Files.createSymbolicLink(privateHome.resolve("jars"), home.jars);

        List<String> classPath = new ArrayList<>();
        classPath.add(home.jars + File.separator + "*");
        classPath.add(System.getProperty("slipstream.it.appClasses", "target/classes"));
        // FabricReadProbe (jvm/ohb-spark), which the application uses, from wherever this JVM has it.
        classPath.add(Path.of(io.slipstream.ohb.spark.FabricReadProbe.class.getProtectionDomain().getCodeSource().getLocation()
                .toURI()).toString());
        extraClassPath.forEach(path -> classPath.add(path.toString()));

        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-Xmx1g");
        String jvmOpts = String.join(" ", jvmOpts());
        command.addAll(jvmOpts());
        command.addAll(home.driverModuleOptions());
        command.add("-cp");
        command.add(String.join(File.pathSeparator, classPath));
        command.add(ScenarioApp.class.getName());
        Map<String, String> settings = new LinkedHashMap<>();
        settings.put("spark.local.dir", folder.resolve("local").toString());
        settings.putAll(conf);
        if (!jvmOpts.isEmpty()) {
            settings.merge("spark.executor.extraJavaOptions", jvmOpts, (own, common) -> common + " " + own);
        }
        settings.forEach((key, value) -> {
            command.add("--conf");
            command.add(key + "=" + value);
        });
        if (!scenarios.isEmpty()) {
            command.add("--scenarios");
            command.add(String.join(",", scenarios));
        }
        command.addAll(arguments);

        ProcessBuilder builder = new ProcessBuilder(host.command(command)).redirectErrorStream(true)
                .redirectOutput(folder.resolve("driver.log").toFile());
        builder.environment().put("SPARK_HOME", privateHome.toString());
        builder.environment().put("SPARK_SCALA_VERSION", "2.13");
        // Loopback, or the address of the driver's own host: the only addresses tests may send traffic to here, and
        // the fabric's network device (otherwise Spark binds the machine's address, which UCX on lo cannot reach).
        builder.environment().put("SPARK_LOCAL_IP", host.address());
        Files.writeString(folder.resolve("command.txt"), String.join(" ", builder.command()) + "\n");

        long started = System.nanoTime();
        Process driver = builder.start();
        // Should this JVM be stopped while waiting (Surefire's fork timeout), the application goes with it.
        Thread killer = new Thread(() -> kill(driver));
        Runtime.getRuntime().addShutdownHook(killer);
        boolean finished = driver.waitFor(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        if (!finished) {
            kill(driver);
            driver.waitFor(30, TimeUnit.SECONDS);
        }
        Runtime.getRuntime().removeShutdownHook(killer);
        long elapsedMs = (System.nanoTime() - started) / 1_000_000;
        List<String> lines = Files.readAllLines(folder.resolve("driver.log"), StandardCharsets.UTF_8);
        ApplicationRun run = new ApplicationRun(name, folder, !finished, finished ? driver.exitValue() : -1,
                elapsedMs, lines);
        System.out.printf("%s: %s in %d s%n", name, run.timedOut ? "timed out" : "exit " + run.exitStatus,
                elapsedMs / 1000);
        return run;
    }

    /** Executors first: they are the driver's children (local-cluster's workers live in the driver). */
    private static void kill(Process driver) {
        driver.descendants().forEach(ProcessHandle::destroyForcibly);
        driver.destroyForcibly();
    }

    /** Fails, with the logs, unless the application ran every scenario and exited cleanly. */
    void assertCompleted() {
        if (timedOut) {
            fail(name + ": the application did not finish in " + TIMEOUT + "\n" + logs());
        }
        if (exitStatus != 0 || !failures.isEmpty()) {
            fail(name + ": exit status " + exitStatus + ", failed scenarios " + failures.values() + "\n" + logs());
        }
    }

    String fact(String key) {
        return facts.get(key);
    }

    long metric(String key) {
        Long value = metrics.get(key);
        if (value == null) {
            fail(name + ": no METRIC " + key + "\n" + logs());
        }
        return value;
    }

    long scenarioMetric(String scenario, String key) {
        return scenarioMetrics.getOrDefault(scenario + " " + key, 0L);
    }

    /** The tail of the driver's output and of each executor's stderr, for failure messages. */
    String logs() {
        StringBuilder logs = new StringBuilder();
        logs.append("---- ").append(folder.resolve("driver.log")).append(" (last ").append(LOG_TAIL_LINES)
                .append(" lines)\n");
        tail(lines, logs);
        Path work = folder.resolve("home").resolve("work");
        if (Files.isDirectory(work)) {
            try (Stream<Path> files = Files.walk(work)) {
                for (Path stderr : files.filter(f -> f.getFileName().toString().equals("stderr")).sorted().toList()) {
                    logs.append("---- ").append(stderr).append('\n');
                    tail(Files.readAllLines(stderr, StandardCharsets.UTF_8), logs);
                }
            } catch (IOException e) {
                logs.append("(executor logs unreadable: ").append(e).append(")\n");
            }
        }
        return logs.toString();
    }

    private static void tail(List<String> lines, StringBuilder into) {
        for (String line : lines.subList(Math.max(0, lines.size() - LOG_TAIL_LINES), lines.size())) {
            into.append(line).append('\n');
        }
    }

    private static void deleteRecursively(Path folder) throws IOException {
        if (!Files.exists(folder)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(folder)) {
            paths.sorted(Comparator.reverseOrder()).forEach(path -> {
                try {
                    Files.delete(path);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            });
        }
    }
}
