package io.slipstream.spark.it;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;
import java.util.stream.Stream;

/**
 * A Spark standalone cluster from a Spark home: one Master and one or more Workers, each its own JVM, on 127.0.0.1
 * (free ports) or each on a host of its own ({@link NetnsHosts}), the Workers with the settings given (e.g. their
 * external shuffle service). Executors are the Workers' children; {@link #close} stops all of them. Logs, work and
 * local directories stay in its folder under target/ (one file system for every host).
 */
final class StandaloneCluster implements AutoCloseable {
    /** How long the Worker may take to register with the Master (a few seconds on an idle machine). */
    static final Duration REGISTRATION_WAIT = Duration.ofSeconds(90);

    /** Spark's defaults: the ports of a Master or Worker on a host of its own. */
    static final int MASTER_PORT = 7077;
    static final int MASTER_WEBUI_PORT = 8080;
    static final int WORKER_PORT = 7078;
    static final int WORKER_WEBUI_PORT = 8081;

    final Path folder;
    final String masterAddress;
    final int masterPort;
    private final List<Process> processes = new ArrayList<>();
    private final List<Process> workers = new ArrayList<>();

    private StandaloneCluster(Path folder, String masterAddress, int masterPort) {
        this.folder = folder;
        this.masterAddress = masterAddress;
        this.masterPort = masterPort;
    }

    /** Starts the Master and one Worker of {@code cores} cores with {@code workerConf}; waits until the Worker registered. */
    static StandaloneCluster start(String name, SparkHome home, int cores, Map<String, String> workerConf) throws Exception {
        return start(name, home, Host.LOOPBACK, List.of(Host.LOOPBACK), cores, workerConf);
    }

    /**
     * Starts the Master on {@code masterHost} and one Worker of {@code cores} cores with {@code workerConf} on each of
     * {@code workerHosts}, each bound to its host's address; waits until every Worker registered. On loopback the ports
     * are free ones of 127.0.0.1; on a host of its own a process has the ports to itself and takes Spark's defaults.
     */
    static StandaloneCluster start(String name, SparkHome home, Host masterHost, List<Host> workerHosts, int cores,
            Map<String, String> workerConf) throws Exception {
        Path folder = Path.of(System.getProperty("slipstream.it.workDir", "target/spark-it")).resolve(name).toAbsolutePath();
        deleteRecursively(folder);
        Path privateHome = folder.resolve("home");
        Files.createDirectories(privateHome);
        Files.createSymbolicLink(privateHome.resolve("jars"), home.jars);
        StandaloneCluster cluster = new StandaloneCluster(folder, masterHost.address(), port(masterHost, MASTER_PORT));
        try {
            cluster.launch(home, privateHome, masterHost, "master", List.of("org.apache.spark.deploy.master.Master", "--host",
                    masterHost.address(), "--port", Integer.toString(cluster.masterPort), "--webui-port",
                    Integer.toString(port(masterHost, MASTER_WEBUI_PORT))));
            Path properties = folder.resolve("worker.properties");
            StringBuilder text = new StringBuilder();
            workerConf.forEach((key, value) -> text.append(key).append('=').append(value).append('\n'));
            Files.writeString(properties, text.toString());
            for (int i = 0; i < workerHosts.size(); i++) {
                Host host = workerHosts.get(i);
                // The first Worker keeps the names a single-Worker cluster always had.
                String role = i == 0 ? "worker" : "worker" + i;
                String suffix = i == 0 ? "" : Integer.toString(i);
                cluster.launch(home, privateHome, host, role, List.of("org.apache.spark.deploy.worker.Worker", "--host",
                        host.address(), "--port", Integer.toString(port(host, WORKER_PORT)), "--webui-port",
                        Integer.toString(port(host, WORKER_WEBUI_PORT)), "--cores", Integer.toString(cores), "--memory", "3g",
                        "--work-dir", privateHome.resolve("work" + suffix).toString(), "--properties-file", properties.toString(),
                        cluster.masterUrl()));
                cluster.workers.add(cluster.processes.get(cluster.processes.size() - 1));
            }
            for (int i = 0; i < workerHosts.size(); i++) {
                cluster.awaitLog((i == 0 ? "worker" : "worker" + i) + ".log", "Successfully registered with master");
            }
            return cluster;
        } catch (Exception | Error e) {
            cluster.close();
            throw e;
        }
    }

    /** A free port of 127.0.0.1 on loopback; on a host of its own, {@code own}. */
    private static int port(Host host, int own) throws IOException {
        return host.equals(Host.LOOPBACK) ? freePort() : own;
    }

    String masterUrl() {
        return "spark://" + masterAddress + ":" + masterPort;
    }

    /** The Workers' processes as started (on a host of its own, the launcher's: the Worker and its executors are its descendants). */
    List<Process> workers() {
        return List.copyOf(workers);
    }

    /** The tail of the Master's and Worker's logs and every executor's stderr, for failure messages and checks. */
    String logs() throws IOException {
        return contents(filesUnder(folder, f -> f.getFileName().toString().matches("stderr|master\\.log|worker\\d*\\.log")));
    }

    /** Every executor's stderr of application {@code appId} (under each Worker's work directory). */
    String applicationLogs(String appId) throws IOException {
        return contents(filesUnder(folder, f -> f.getFileName().toString().equals("stderr") && f.getParent() != null
                && f.getParent().getParent() != null && f.getParent().getParent().getFileName().toString().equals(appId)));
    }

    /**
     * The files under {@code root} that {@code wanted} takes, sorted. The Workers delete their applications' local
     * directories (local-worker*&#47;spark-*) when an application ends, possibly while this walks: a path that
     * vanished under the walk is skipped (a clean run failed once with NoSuchFileException here, session 33).
     */
    private static List<Path> filesUnder(Path root, Predicate<Path> wanted) throws IOException {
        List<Path> found = new ArrayList<>();
        Files.walkFileTree(root, new SimpleFileVisitor<Path>() {
            @Override
            public FileVisitResult visitFile(Path file, BasicFileAttributes attributes) {
                if (wanted.test(file)) {
                    found.add(file);
                }
                return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFileFailed(Path file, IOException e) throws IOException {
                if (e instanceof NoSuchFileException) {
                    return FileVisitResult.CONTINUE;
                }
                throw e;
            }

            /** A directory deleted while its entries were read ends with this exception here. */
            @Override
            public FileVisitResult postVisitDirectory(Path dir, IOException e) throws IOException {
                if (e == null || e instanceof NoSuchFileException) {
                    return FileVisitResult.CONTINUE;
                }
                throw e;
            }
        });
        return found.stream().sorted().toList();
    }

    /** Each file's name and text; a file gone before it was read is skipped. */
    private static String contents(List<Path> files) throws IOException {
        StringBuilder logs = new StringBuilder();
        for (Path file : files) {
            try {
                String text = Files.readString(file, StandardCharsets.UTF_8);
                logs.append("---- ").append(file).append('\n').append(text).append('\n');
            } catch (NoSuchFileException e) {
                // deleted since the walk
            }
        }
        return logs.toString();
    }

    private void launch(SparkHome home, Path privateHome, Host host, String role, List<String> mainAndArguments) throws Exception {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-Xmx256m");
        command.addAll(ApplicationRun.jvmOpts());
        command.addAll(home.driverModuleOptions());
        command.add("-cp");
        command.add(home.jars + File.separator + "*");
        command.addAll(mainAndArguments);
        ProcessBuilder builder = new ProcessBuilder(host.command(command)).redirectErrorStream(true)
                .redirectOutput(folder.resolve(role + ".log").toFile());
        builder.environment().put("SPARK_HOME", privateHome.toString());
        builder.environment().put("SPARK_SCALA_VERSION", "2.13");
        builder.environment().put("SPARK_LOCAL_IP", host.address());
        Path local = folder.resolve("local-" + role);
        Files.createDirectories(local);
        builder.environment().put("SPARK_LOCAL_DIRS", local.toString());
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
