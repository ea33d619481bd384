package io.slipstream.mapreduce.it;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;
import org.apache.hadoop.yarn.server.resourcemanager.rmnode.RMNode;

/**
 * A real NodeManager in its own JVM (Hadoop's {@code NodeManager} main class from the Maven jars on
 * this test's class path), joining a mini cluster's ResourceManager: a process that a test can kill
 * with SIGKILL, taking its containers with it, as a host is lost. It listens on its own loopback
 * address ({@code 127.0.0.x}) so that its fabric node can use the cluster's one fabric port beside
 * the in-JVM NodeManagers' (on 127.0.0.1), as on a cluster where every host has the same port.
 */
final class NodeManagerProcess implements AutoCloseable {
    /** Longest wait for the NodeManager to register with the ResourceManager. */
    private static final long REGISTER_TIMEOUT_MS = 90_000;

    final String host;
    private final File dir;
    private final Process process;

    /**
     * Starts a NodeManager on {@code host} (a 127.0.0.0/8 address) with {@code memoryMb} for
     * containers, its configuration the cluster's ({@code clusterConf}: the ResourceManager's
     * addresses, the {@code mapreduce_shuffle} aux service's class and the fabric port) with its
     * own addresses and directories.
     */
    NodeManagerProcess(Configuration clusterConf, String host, int memoryMb, File dir) throws IOException {
        if (!InetAddress.getByName(host).isLoopbackAddress()) {
            throw new IllegalArgumentException(host + " is not a loopback address: test traffic stays on 127.0.0.0/8");
        }
        this.host = host;
        this.dir = dir;
        File confDir = new File(dir, "conf");
        Files.createDirectories(confDir.toPath());
        Configuration conf = new Configuration(clusterConf);
        conf.set("yarn.nodemanager.hostname", host);
        conf.set("yarn.nodemanager.address", host + ":0");
        conf.set("yarn.nodemanager.localizer.address", host + ":" + freePort(host));
        conf.set("yarn.nodemanager.webapp.address", host + ":0");
        conf.set("yarn.nodemanager.collector-service.address", host + ":0");
        conf.set("yarn.nodemanager.local-dirs", new File(dir, "local").getAbsolutePath());
        conf.set("yarn.nodemanager.log-dirs", new File(dir, "logs").getAbsolutePath());
        conf.set("hadoop.tmp.dir", new File(dir, "tmp").getAbsolutePath());
        conf.setInt("yarn.nodemanager.resource.memory-mb", memoryMb);
        conf.setBoolean("yarn.nodemanager.recovery.enabled", false);
        conf.setFloat("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage", 100f);
        conf.set("slipstream.mapreduce.bindAddress", host);
        try (OutputStream out = new FileOutputStream(new File(confDir, "yarn-site.xml"))) {
            conf.writeXml(out);
        }
        // The HTTP shuffle on a port the kernel picks when it binds (the NodeManager tells the
        // ApplicationMaster which, as in-JVM mini cluster NodeManagers do). Not in yarn-site.xml:
        // the ShuffleHandler makes a JobConf of its configuration before it reads its port, which
        // adds mapred-default.xml (mapreduce.shuffle.port=13562) to the default resources after
        // yarn-site.xml, so that value wins over yarn-site.xml's and every NodeManager process binds
        // 13562 on every address (a second process fails with a BindException). mapred-site.xml
        // comes after mapred-default.xml.
        Configuration mapred = new Configuration(false);
        mapred.setInt("mapreduce.shuffle.port", 0);
        try (OutputStream out = new FileOutputStream(new File(confDir, "mapred-site.xml"))) {
            mapred.writeXml(out);
        }
        List<String> command = new ArrayList<>();
        command.add(new File(System.getProperty("java.home"), "bin/java").getAbsolutePath());
        command.add("-Xmx256m");
        command.add("--add-opens=java.base/java.lang=ALL-UNNAMED");
        command.add("-cp");
        // The configuration directory first: its yarn-site.xml wins over any on the class path.
        command.add(confDir.getAbsolutePath() + File.pathSeparator + System.getProperty("java.class.path"));
        command.add("org.apache.hadoop.yarn.server.nodemanager.NodeManager");
        process = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(new File(dir, "nodemanager.log")).start();
    }

    /** A TCP port free on {@code host} (the kernel's choice), for a listener bound to that address only. */
    private static int freePort(String host) throws IOException {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getByName(host))) {
            return socket.getLocalPort();
        }
    }

    /** This NodeManager's id once the ResourceManager knows it as running; fails after a bounded wait. */
    NodeId awaitRegistered(ResourceManager rm) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + REGISTER_TIMEOUT_MS * 1_000_000;
        while (System.nanoTime() < deadline) {
            if (!process.isAlive()) {
                throw new IOException("the NodeManager on " + host + " exited (" + process.exitValue() + "): " + logTail());
            }
            for (RMNode node : rm.getRMContext().getRMNodes().values()) {
                if (node.getNodeID().getHost().equals(host)) {
                    return node.getNodeID();
                }
            }
            Thread.sleep(200);
        }
        throw new IOException("the NodeManager on " + host + " did not register within " + REGISTER_TIMEOUT_MS + " ms: " + logTail());
    }

    /** The process and everything it started (its containers' JVMs) killed with SIGKILL, as a host is lost. */
    void kill() throws InterruptedException {
        List<ProcessHandle> tree = new ArrayList<>(process.descendants().toList());
        process.destroyForcibly();
        tree.forEach(ProcessHandle::destroyForcibly);
        process.waitFor();
        for (ProcessHandle child : tree) {
            child.onExit().join();
        }
    }

    boolean isAlive() {
        return process.isAlive();
    }

    /** The last lines of the NodeManager's log (for a failure's message). */
    String logTail() {
        try {
            List<String> lines = Files.readAllLines(new File(dir, "nodemanager.log").toPath());
            return String.join("\n", lines.subList(Math.max(0, lines.size() - 30), lines.size()));
        } catch (IOException e) {
            return "(no log: " + e + ")";
        }
    }

    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) {
            kill();
        }
    }
}
