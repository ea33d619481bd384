package io.slipstream.spark.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The separate-hosts helper itself: what a process started on a host sees, reachability, and cleanup. */
class NetnsHostsTest {

    /** Runs the bash {@code script} on the host and returns its output. */
    private static String onHost(Host host, String script) throws Exception {
        Process process = new ProcessBuilder(host.command(List.of("bash", "-c", script))).redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(process.waitFor(30, TimeUnit.SECONDS), "the host's process did not end");
        assertEquals(0, process.exitValue(), output);
        return output;
    }

    @Test
    void a_process_on_a_host_has_its_own_namespaces_and_reaches_the_other_hosts_over_the_link() throws Exception {
        try (NetnsHosts hosts = NetnsHosts.create(2)) {
            String script = "readlink /proc/self/ns/net /proc/self/ns/ipc /proc/self/ns/pid; echo pid $$; "
                    + "grep ' /dev/shm ' /proc/self/mounts; ip -o -4 addr show; "
                    + "(echo > /dev/tcp/" + NetnsHosts.address(1) + "/9) 2>&1 || true";
            String seen = onHost(hosts.host(0), script);
            String[] lines = seen.split("\n");
            assertEquals(hosts.netNamespace(0), lines[0], seen);
            assertNotEquals(Files.readSymbolicLink(Path.of("/proc/self/ns/ipc")).toString(), lines[1], seen);
            assertNotEquals(Files.readSymbolicLink(Path.of("/proc/self/ns/pid")).toString(), lines[2], seen);
            assertEquals("pid 1", lines[3], "the program is its PID namespace's first process\n" + seen);
            assertTrue(seen.contains("slipstream-shm /dev/shm tmpfs"), "no private /dev/shm\n" + seen);
            // Only loopback and the link: no address of the machine.
            assertTrue(seen.contains("veth0    inet " + NetnsHosts.address(0) + "/24"), seen);
            assertEquals(2, seen.lines().filter(line -> line.contains(" inet ")).count(), seen);
            // Nothing listens on port 9 of host 1: its refusal came back over the link (not "unreachable").
            assertTrue(seen.contains("Connection refused"), seen);
            assertNotEquals(hosts.netNamespace(0), hosts.netNamespace(1));
            long[] received = hosts.linkBytes(1);
            assertTrue(received[0] > 0 && received[1] > 0, "host 1's link carried nothing: " + received[0] + ", " + received[1]);
        }
        assertTrue(ownNamespaces().isEmpty(), "namespaces left after close: " + ownNamespaces());
    }

    @Test
    void namespaces_of_a_dead_process_are_removed_and_none_of_this_one_s_stay() throws Exception {
        Process gone = new ProcessBuilder("true").start();
        gone.waitFor();
        String stale = NetnsHosts.PREFIX + gone.pid() + "-0hub";
        NetnsHosts.run("ip", "netns", "add", stale);
        try (NetnsHosts hosts = NetnsHosts.create(1)) {
            assertFalse(NetnsHosts.existing().contains(stale), "a dead process's namespace is still there");
            assertEquals(2, ownNamespaces().size(), "a host and the hub: " + ownNamespaces());
        } finally {
            new ProcessBuilder("ip", "netns", "del", stale).redirectErrorStream(true).start().waitFor();
        }
        assertTrue(ownNamespaces().isEmpty(), "namespaces left after close: " + ownNamespaces());
    }

    private static List<String> ownNamespaces() throws Exception {
        List<String> own = new ArrayList<>();
        for (String name : NetnsHosts.existing()) {
            if (name.startsWith(NetnsHosts.PREFIX + ProcessHandle.current().pid() + "-")) {
                own.add(name);
            }
        }
        return own;
    }
}
