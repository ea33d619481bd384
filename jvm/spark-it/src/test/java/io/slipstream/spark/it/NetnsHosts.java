package io.slipstream.spark.it;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Separate "hosts" on one machine, for Spark clusters whose processes must talk over a network: each host is a
 * network namespace created (and removed) here, with one end of a veth pair whose other end is a port of a Linux
 * bridge in a hub namespace of its own, so every host reaches every other and nothing is added to the caller's
 * namespace. Every process started on a host ({@link #host}'s launcher) also gets fresh IPC, PID and mount namespaces
 * with a private {@code /dev/shm}: no shared memory, no CMA (no common PID space) and no loopback between hosts, so
 * UCX reaches another host only over TCP on the link, as between two machines. The file system is shared (logs, work
 * and local directories, the application's classes), as on a cluster with a shared home.
 *
 * <p>The same rules as the fabric's Rust helper ({@code native/fabric/tests/support/hosts.rs}): addresses from
 * 198.18.0.0/15 (RFC 2544's benchmarking range, never routed; here 198.18.78.0/24, host i at .i+1), which exist only
 * inside these namespaces; the link waited for until it reports up (UCX's TCP transport ignores a device that is not up
 * yet); root, iproute2 and util-linux needed, and their absence a failure, never a skip. Namespaces are named
 * {@code slipstream-j<pid>-<n><hub|h<i>>}; any left by a process that no longer exists (a run killed before its
 * cleanup) are removed first. One set of hosts at a time per JVM, at most {@link #NAMESPACES_PER_PROCESS_MAX}
 * namespaces per JVM.
 */
final class NetnsHosts implements AutoCloseable {
    static final String PREFIX = "slipstream-j";
    static final int HOSTS_MAX = 8;
    static final int NAMESPACES_PER_PROCESS_MAX = 32;
    /** Each host's end of its link. */
    static final String DEVICE = "veth0";
    static final String BRIDGE = "br0";
    /** A size limit, not an allocation: UCX's shared-memory transports map their FIFOs here, within one host. */
    static final String SHM_MOUNT = "mount -t tmpfs -o size=256m slipstream-shm /dev/shm && exec \"$0\" \"$@\"";
    static final long COMMAND_TIMEOUT_MS = 30_000;
    static final long LINK_UP_WAIT_MS = 10_000;

    private static final AtomicInteger CREATED = new AtomicInteger();
    /** One set of hosts at a time: a 2-core machine, and tests that count this JVM's namespaces. */
    private static final Semaphore ONE_AT_A_TIME = new Semaphore(1);

    private final String hub;
    private final List<String> namespaces;
    private final Thread removeAtExit = new Thread(this::removeNamespaces);
    private boolean closed;

    private NetnsHosts(String hub, List<String> namespaces) {
        this.hub = hub;
        this.namespaces = namespaces;
    }

    /** Creates {@code count} hosts joined by the hub's bridge, every link up. Fails (never skips) without root. */
    static NetnsHosts create(int count) throws IOException, InterruptedException {
        assertTrue(count >= 1 && count <= HOSTS_MAX, "1 to " + HOSTS_MAX + " hosts, not " + count);
        if (!isRoot()) {
            fail("the separate-hosts tests need root to create network namespaces (CI runs as root)");
        }
        requireTool("ip", "-V");
        requireTool("unshare", "--version");
        if (!ONE_AT_A_TIME.tryAcquire(10, TimeUnit.MINUTES)) {
            fail("another set of test hosts in this JVM was not closed within 10 minutes");
        }
        NetnsHosts hosts = null;
        try {
            int n = CREATED.getAndAdd(count + 1);
            assertTrue(n + count + 1 <= NAMESPACES_PER_PROCESS_MAX,
                    "more than " + NAMESPACES_PER_PROCESS_MAX + " test namespaces in one JVM");
            removeStaleNamespaces();
            String stem = PREFIX + ProcessHandle.current().pid() + "-" + n;
            List<String> namespaces = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                namespaces.add(stem + "h" + i);
            }
            hosts = new NetnsHosts(stem + "hub", List.copyOf(namespaces));
            Runtime.getRuntime().addShutdownHook(hosts.removeAtExit);
            hosts.build();
            return hosts;
        } catch (Exception | Error e) {
            if (hosts != null) {
                hosts.close();
            } else {
                ONE_AT_A_TIME.release();
            }
            throw e;
        }
    }

    private void build() throws IOException, InterruptedException {
        run("ip", "netns", "add", hub);
        run("ip", "-n", hub, "link", "add", BRIDGE, "type", "bridge");
        run("ip", "-n", hub, "link", "set", BRIDGE, "up");
        for (int i = 0; i < namespaces.size(); i++) {
            String ns = namespaces.get(i);
            run("ip", "netns", "add", ns);
            // Both ends are created inside their namespaces: nothing appears in the caller's.
            String port = "port" + i;
            run("ip", "link", "add", "name", port, "netns", hub, "type", "veth", "peer", "name", DEVICE, "netns", ns);
            run("ip", "-n", hub, "link", "set", port, "master", BRIDGE);
            run("ip", "-n", hub, "link", "set", port, "up");
            run("ip", "-n", ns, "addr", "add", address(i) + "/24", "dev", DEVICE);
            run("ip", "-n", ns, "link", "set", "lo", "up");
            run("ip", "-n", ns, "link", "set", DEVICE, "up");
        }
        for (int i = 0; i < namespaces.size(); i++) {
            awaitLinkUp(namespaces.get(i), DEVICE);
            awaitLinkUp(hub, "port" + i);
        }
    }

    int count() {
        return namespaces.size();
    }

    /** Host i's address, on its end of the link. */
    static String address(int host) {
        return "198.18.78." + (host + 1);
    }

    String namespace(int host) {
        return namespaces.get(host);
    }

    /**
     * Host i: its address, and the launcher that runs a program in its network namespace and fresh IPC, PID and mount
     * namespaces with a private {@code /dev/shm}. Killing the launched process (unshare) kills the program and
     * everything in its PID namespace ({@code --kill-child}: the program is that namespace's first process).
     */
    Host host(int host) {
        return new Host(address(host), List.of("ip", "netns", "exec", namespaces.get(host), "unshare", "--ipc", "--pid",
                "--mount", "--fork", "--kill-child", "--mount-proc", "sh", "-c", SHM_MOUNT));
    }

    /** {@code net:[inode]} of host i's network namespace, as {@code /proc/<pid>/ns/net} of its processes reads. */
    String netNamespace(int host) throws IOException {
        return "net:[" + Files.getAttribute(Path.of("/run/netns", namespaces.get(host)), "unix:ino") + "]";
    }

    /** Bytes host i's end of its link has received and sent: {rx, tx}. */
    long[] linkBytes(int host) throws IOException, InterruptedException {
        String statistics = "/sys/class/net/" + DEVICE + "/statistics/";
        String[] counters = run("ip", "netns", "exec", namespaces.get(host), "cat", statistics + "rx_bytes",
                statistics + "tx_bytes").trim().split("\\s+");
        return new long[] {Long.parseLong(counters[0]), Long.parseLong(counters[1])};
    }

    /** Removes the namespaces (the links go with them). Processes still inside keep theirs until they end. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        removeNamespaces();
        try {
            Runtime.getRuntime().removeShutdownHook(removeAtExit);
        } catch (IllegalStateException e) {
            // The JVM is shutting down: the hook runs or ran.
        }
        ONE_AT_A_TIME.release();
    }

    private void removeNamespaces() {
        List<String> all = new ArrayList<>(namespaces);
        all.add(hub);
        for (String ns : all) {
            try {
                new ProcessBuilder("ip", "netns", "del", ns).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD)
                        .start().waitFor(COMMAND_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            } catch (IOException e) {
                // Nothing more to do: the next run removes it as stale.
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /** Namespaces of this helper whose creating JVM is gone. */
    static void removeStaleNamespaces() throws IOException, InterruptedException {
        long self = ProcessHandle.current().pid();
        for (String line : run("ip", "netns", "list").split("\n")) {
            String name = line.trim().split("\\s+")[0];
            if (!name.startsWith(PREFIX)) {
                continue;
            }
            String rest = name.substring(PREFIX.length());
            int dash = rest.indexOf('-');
            long pid;
            try {
                pid = Long.parseLong(dash < 0 ? rest : rest.substring(0, dash));
            } catch (NumberFormatException e) {
                continue;
            }
            if (pid != self && !Files.exists(Path.of("/proc", Long.toString(pid)))) {
                run("ip", "netns", "del", name);
            }
        }
    }

    /** The namespaces of this helper that exist now (for tests of the helper itself). */
    static List<String> existing() throws IOException, InterruptedException {
        List<String> names = new ArrayList<>();
        for (String line : run("ip", "netns", "list").split("\n")) {
            String name = line.trim().split("\\s+")[0];
            if (name.startsWith(PREFIX)) {
                names.add(name);
            }
        }
        return names;
    }

    /**
     * Waits (bounded) until the device reports up: the kernel announces a carrier change up to a second after
     * {@code ip link set up}.
     */
    private static void awaitLinkUp(String namespace, String device) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(LINK_UP_WAIT_MS);
        while (true) {
            String state = run("ip", "netns", "exec", namespace, "cat", "/sys/class/net/" + device + "/operstate").trim();
            if (state.equals("up")) {
                return;
            }
            if (System.nanoTime() > deadline) {
                fail(device + " in " + namespace + " still " + state + " after " + LINK_UP_WAIT_MS + " ms");
            }
            Thread.sleep(20);
        }
    }

    private static boolean isRoot() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"), StandardCharsets.US_ASCII)) {
            if (line.startsWith("Uid:")) {
                return line.split("\\s+")[2].equals("0"); // the effective uid
            }
        }
        return false;
    }

    private static void requireTool(String program, String versionFlag) throws InterruptedException {
        try {
            run(program, versionFlag);
        } catch (IOException e) {
            fail("cannot run " + program + " (the separate-hosts tests need iproute2 and util-linux, installed by `make deps`): "
                    + e.getMessage());
        }
    }

    /** Runs a command to completion; fails with its output unless it succeeds. Returns its standard output. */
    static String run(String... command) throws IOException, InterruptedException {
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        byte[] output = process.getInputStream().readAllBytes();
        if (!process.waitFor(COMMAND_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
            process.destroyForcibly();
            fail(String.join(" ", command) + " did not end within " + COMMAND_TIMEOUT_MS + " ms");
        }
        String text = new String(output, StandardCharsets.UTF_8);
        if (process.exitValue() != 0) {
            fail(String.join(" ", command) + " failed (" + process.exitValue() + "): " + text);
        }
        return text;
    }
}
