package io.slipstream.spark.it;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * A Spark standalone cluster from a Spark home: one Master and one Worker, each its own JVM, on 127.0.0.1 (free
 * ports), the Worker with the settings given (e.g. its external shuffle service). Executors are the Worker's
 * children; {@link #close} stops all of them. Logs and local directories stay in its folder under target/.
 */
final class StandaloneCluster implements AutoCloseable {
    /** How long the Worker may take to register with the Master (a few seconds on an idle machine). */
    static final Duration REGISTRATION_WAIT = Duration.ofSeconds(90);

    final Path folder;
    final int masterPort;
    private final List<Process> processes = new ArrayList<>();

    private StandaloneCluster(Path folder, int masterPort) {
        this.folder = folder;
        this.masterPort = masterPort;
    }

    /** Starts the Master and one Worker of {@code cores} cores with {@code workerConf}; waits until the Worker registered. */
    static StandaloneCluster start(String name, SparkHome home, int cores, Map<String, String> workerConf) throws Exception {
        Path folder = Path.of(System.getProperty("slipstream.it.workDir", "target/spark-it")).resolve(name).toAbsolutePath();
        deleteRecursively(folder);
        Path privateHome = folder.resolve("home");
        Files.createDirectories(privateHome);
        Files.createSymbolicLink(privateHome.resolve("jars"), home.jars);
        Files.createDirectories(folder.resolve("local"));
        StandaloneCluster cluster = new StandaloneCluster(folder, freePort());
        try {
            cluster.launch(home, privateHome, "master", List.of("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", Integer.toString(cluster.masterPort), "--webui-port", Integer.toString(freePort())));
            Path properties = folder.resolve("worker.properties");
            StringBuilder text = new StringBuilder();
            workerConf.forEach((key, value) -> text.append(key).append('=').append(value).append('\n'));
            Files.writeString(properties, text.toString());
            cluster.launch(home, privateHome, "worker", List.of("org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                    "--port", Integer.toString(freePort()), "--webui-port", Integer.toString(freePort()), "--cores",
                    Integer.toString(cores), "--memory", "3g", "--work-dir", privateHome.resolve("work").toString(),
                    "--properties-file", properties.toString(), cluster.masterUrl()));
            cluster.awaitLog("worker.log", "Successfully registered with master");
            return cluster;
        } catch (Exception | Error e) {
            cluster.close();
            throw e;
        }
    }

    String masterUrl() {
        return "spark://127.0.0.1:" + masterPort;
    }

    /** The tail of the Master's and Worker's logs and every executor's stderr, for failure messages and checks. */
    String logs() throws IOException {
        StringBuilder logs = new StringBuilder();
        try (Stream<Path> files = Files.walk(folder)) {
            for (Path file : files.filter(f -> f.getFileName().toString().matches("stderr|master\\.log|worker\\.log")).sorted()
                    .toList()) {
                logs.append("---- ").append(file).append('\n').append(Files.readString(file, StandardCharsets.UTF_8)).append('\n');
            }
        }
        return logs.toString();
    }

    private void launch(SparkHome home, Path privateHome, String role, List<String> mainAndArguments) throws Exception {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-Xmx256m");
        command.addAll(home.driverModuleOptions());
        command.add("-cp");
        command.add(home.jars + File.separator + "*");
        command.addAll(mainAndArguments);
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(folder.resolve(role + ".log").toFile());
        builder.environment().put("SPARK_HOME", privateHome.toString());
        builder.environment().put("SPARK_SCALA_VERSION", "2.13");
        builder.environment().put("SPARK_LOCAL_IP", "127.0.0.1");
        builder.environment().put("SPARK_LOCAL_DIRS", folder.resolve("local").toString());
        builder.environment().put("JAVA_HOME", System.getProperty("java.home"));
        processes.add(builder.start());
    }

    private void awaitLog(String log, String line) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + REGISTRATION_WAIT.toNanos();
        Path file = folder.resolve(log);
        while (System.nanoTime() < deadline) {
            if (Files.isRegularFile(file) && Files.readString(file, StandardCharsets.UTF_8).contains(line)) {
                return;
            }
            for (Process process : processes) {
                if (!process.isAlive()) {
                    fail("a standalone cluster process exited with status " + process.exitValue() + "\n" + logs());
                }
            }
            Thread.sleep(200);
        }
        fail("no '" + line + "' in " + file + " within " + REGISTRATION_WAIT + "\n" + logs());
    }

    static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
            return socket.getLocalPort();
        }
    }

    /** Executors (the Worker's children) first, then the Worker and the Master. */
    @Override
    public void close() {
        for (int i = processes.size() - 1; i >= 0; i--) {
            Process process = processes.get(i);
            process.descendants().forEach(ProcessHandle::destroyForcibly);
            process.destroyForcibly();
        }
        for (Process process : processes) {
            try {
                process.waitFor(30, java.util.concurrent.TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private static void deleteRecursively(Path folder) throws IOException {
        if (!Files.exists(folder)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(folder)) {
            for (Path path : paths.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.delete(path);
            }
        }
    }
}
