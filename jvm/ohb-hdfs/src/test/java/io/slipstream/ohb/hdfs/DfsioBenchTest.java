package io.slipstream.ohb.hdfs;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** What decides whether an {@code ohb hdfs dfsio} run took its configuration's path (no cluster). */
class DfsioBenchTest {
    private static final long BYTES = 32L << 20;

    @Test
    void aPluginRunNeedsEveryByteOverTheFabricOnBothSidesAndEveryReplicaOfAWrite() {
        assertNull(DfsioBench.pathCheck("plugin", "write", BYTES, BYTES + 100, 3 * BYTES + 300));
        assertNull(DfsioBench.pathCheck("plugin-tcp", "read", BYTES, BYTES, BYTES + 4096));
        assertNotNull(DfsioBench.pathCheck("plugin", "write", BYTES, BYTES - 1, 3 * BYTES), "a client byte over HDFS's own writer");
        assertNotNull(DfsioBench.pathCheck("plugin", "write", BYTES, BYTES, 2 * BYTES), "a replica written by HDFS's pipeline");
        assertNotNull(DfsioBench.pathCheck("plugin", "read", BYTES, BYTES, BYTES - 1), "DataNodes served less than was read");
        assertNotNull(DfsioBench.pathCheck("plugin", "read", BYTES, 0, 0), "nothing over the fabric");
    }

    @Test
    void aVanillaRunMustNotTouchTheFabric() {
        assertNull(DfsioBench.pathCheck("vanilla", "write", BYTES, 0, 0));
        assertNotNull(DfsioBench.pathCheck("vanilla", "read", BYTES, 1, 0));
        assertNotNull(DfsioBench.pathCheck("vanilla", "write", BYTES, 0, 1));
    }

    @Test
    void onlyThePluginConfigurationsGiveTestDfsioThePluginsClientSettings() {
        List<String> plugin = DfsioBench.genericOptions("plugin-tcp", "hdfs://127.0.0.1:1", 1 << 20, 2, Path.of("/tmp/x"));
        assertTrue(plugin.contains("fs.hdfs.impl=io.slipstream.hdfs.SlipstreamDistributedFileSystem"), plugin.toString());
        assertTrue(plugin.contains("slipstream.hdfs.transport=tcp") && plugin.contains("slipstream.hdfs.fallback=never"), plugin.toString());
        assertTrue(plugin.contains("fs.hdfs.impl.disable.cache=true") && plugin.contains("mapreduce.framework.name=local"), plugin.toString());
        List<String> vanilla = DfsioBench.genericOptions("vanilla", "hdfs://127.0.0.1:1", 1 << 20, 2, Path.of("/tmp/x"));
        assertFalse(vanilla.stream().anyMatch(o -> o.startsWith("fs.hdfs.impl=") || o.startsWith("slipstream.")), vanilla.toString());
        assertTrue(vanilla.contains("dfs.replication=3") && vanilla.contains("dfs.client.read.shortcircuit=false"), vanilla.toString());
    }
}
