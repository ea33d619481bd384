package io.slipstream.hdfs.tiers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;

class TiersConfTest {
    static final String BEGIN = "<!-- generated from TiersConf.SETTINGS: do not edit by hand -->";
    static final String END = "<!-- end of HDFS tiers section -->";

    @Test
    void defaultsParse() {
        TiersConf conf = new TiersConf(new Configuration(false));
        assertEquals(TierMode.HHH, conf.mode);
        assertEquals(0.9, conf.ramHighWater);
        assertEquals(2, conf.ramMinReplication);
        assertEquals(700, conf.budgetBytes(1000));
        assertEquals(10L << 30, conf.tieringBatchMaxBytes);
        assertEquals(java.util.List.of("/"), conf.tieringPaths);
        assertEquals(3, conf.tieringHotReads);
        assertEquals(TieringPlanner.ALL_SSD, conf.tieringPromotePolicy);
        Configuration oneSsd = new Configuration(false);
        oneSsd.set(TiersConf.TIERING_PROMOTE_POLICY.key(), "one_ssd");
        assertEquals(TieringPlanner.ONE_SSD, new TiersConf(oneSsd).tieringPromotePolicy);
        Configuration m = new Configuration(false);
        m.set(TiersConf.MODE.key(), " HHH-M ");
        m.set(TiersConf.HHHM_BUDGET_BYTES.key(), "8m");
        TiersConf hhhm = new TiersConf(m);
        assertEquals(TierMode.HHH_M, hhhm.mode);
        assertEquals(8L << 20, hhhm.budgetBytes(1000));
    }

    @Test
    void everyModeParsesAndTheBurstBufferReadsItsSettings() {
        Configuration l = new Configuration(false);
        l.set(TiersConf.MODE.key(), "HHH-L");
        assertEquals(TierMode.HHH_L, new TiersConf(l).mode);
        Configuration bb = new Configuration(false);
        bb.set(TiersConf.MODE.key(), "hhh-l-bb");
        bb.set(TiersConf.BB_SERVERS.key(), "cache1:11211, cache2:11300");
        bb.set(TiersConf.BB_CHUNK_BYTES.key(), "1m");
        TiersConf parsed = new TiersConf(bb);
        assertEquals(TierMode.HHH_L_BB, parsed.mode);
        assertTrue(parsed.mode.usesParallelFileSystem());
        assertEquals(2, parsed.bbServers.size());
        assertEquals(11300, parsed.bbServers.get(1).getPort());
        assertEquals(1 << 20, parsed.bbChunkBytes);
        assertEquals(2L << 30, parsed.bbMaxPendingBytes);
        assertEquals(4, parsed.bbMaxInFlightChunks);
        assertEquals(64L << 20, parsed.bbMaxInFlightBytes);
        assertTrue(!parsed.bbOverFabric, "TCP by default");
        bb.set(TiersConf.BB_TRANSPORT.key(), "Fabric");
        assertTrue(new TiersConf(bb).bbOverFabric);
        Configuration noServers = new Configuration(false);
        noServers.set(TiersConf.MODE.key(), "hhh-l-bb");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> BurstBuffer.start(noServers, null, "dn"));
        assertTrue(e.getMessage().contains(TiersConf.BB_SERVERS.key()), e.getMessage());
    }

    @Test
    void badValuesAreRefusedByName() {
        String[][] bad = {
            {TiersConf.MODE.key(), "hhhh"},
            {TiersConf.BB_TRANSPORT.key(), "rdma"},
            {TiersConf.RAM_HIGH_WATER.key(), "0"},
            {TiersConf.RAM_HIGH_WATER.key(), "1.5"},
            {TiersConf.SSD_HIGH_WATER.key(), "lots"},
            {TiersConf.RAM_LOW_WATER.key(), "0.95"},
            {TiersConf.RAM_EVICT_CHECK_MS.key(), "-1"},
            {TiersConf.RAM_EVICT_CHECK_MS.key(), "soon"},
            {TiersConf.RAM_MIN_REPLICATION.key(), "0"},
            {TiersConf.RAM_MIN_REPLICATION.key(), "two"},
            {TiersConf.HHHM_BUDGET_BYTES.key(), "-1"},
            {TiersConf.HHHM_BUDGET_BYTES.key(), "much"},
            {TiersConf.TIERING_INTERVAL_MS.key(), "99"},
            {TiersConf.TIERING_WINDOW_MS.key(), "a while"},
            {TiersConf.TIERING_HOT_READS.key(), "0"},
            {TiersConf.TIERING_PROMOTE_POLICY.key(), "COLD"},
            {TiersConf.TIERING_MAX_TRACKED_FILES.key(), "10000001"},
            {TiersConf.TIERING_SSD_HIGH_WATER.key(), "0"},
            {TiersConf.TIERING_SSD_LOW_WATER.key(), "0.8"},
            {TiersConf.TIERING_BATCH_MAX_FILES.key(), "0"},
            {TiersConf.TIERING_BATCH_MAX_BYTES.key(), "0"},
            {TiersConf.TIERING_BATCH_MAX_BYTES.key(), "big"},
            {TiersConf.TIERING_PATHS.key(), "relative/dir"},
            {TiersConf.TIERING_PATHS.key(), " "},
            {TiersConf.TIERING_SCAN_MAX_FILES.key(), "0"},
            {TiersConf.BB_SERVERS.key(), "cache1"},
            {TiersConf.BB_CHUNK_BYTES.key(), "1k"},
            {TiersConf.BB_CHUNK_BYTES.key(), "huge"},
            {TiersConf.BB_MAX_PENDING_BYTES.key(), "-1"},
            {TiersConf.BB_MAX_IN_FLIGHT_CHUNKS.key(), "0"},
            {TiersConf.BB_MAX_IN_FLIGHT_CHUNKS.key(), "65"},
            {TiersConf.BB_MAX_IN_FLIGHT_BYTES.key(), "100k"}, // below a chunk (511k): no writer could go on
            {TiersConf.BB_FLUSH_DELAY_MS.key(), "-5"},
            {TiersConf.BB_CONNECTIONS.key(), "0"},
            {TiersConf.BB_TIMEOUT_MS.key(), "10"},
        };
        for (String[] setting : bad) {
            Configuration conf = new Configuration(false);
            conf.set(setting[0], setting[1]);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new TiersConf(conf),
                    setting[0] + "=" + setting[1]);
            assertTrue(e.getMessage().contains(setting[0]), e.getMessage());
        }
    }

    /** docs/configuration.md's tiers table is generated from TiersConf.SETTINGS (SLIPSTREAM_BLESS=1 regenerates it). */
    @Test
    void configurationDocumentMatchesTheDeclarations() throws Exception {
        Set<String> declared = new HashSet<>();
        TiersConf.SETTINGS.forEach(s -> declared.add(s.key()));
        Matcher keys = Pattern.compile("PREFIX \\+ \"([a-zA-Z.-]+)\"").matcher(
                Files.readString(Path.of("src/main/java/io/slipstream/hdfs/tiers/TiersConf.java")));
        int found = 0;
        while (keys.find()) {
            found++;
            assertTrue(declared.contains(TiersConf.PREFIX + keys.group(1)), keys.group(1) + " is not in SETTINGS");
        }
        assertEquals(TiersConf.SETTINGS.size(), found, "every declared setting appears once in the source");
        Path doc = Path.of("../../docs/configuration.md");
        String text = Files.readString(doc);
        int start = text.indexOf(BEGIN);
        int end = text.indexOf(END, Math.max(start, 0));
        assertTrue(start >= 0 && end > start, "docs/configuration.md lacks the generated HDFS tiers section");
        String generated = TierSetting.markdownTable(TiersConf.SETTINGS).strip();
        if (System.getenv("SLIPSTREAM_BLESS") != null) {
            Files.writeString(doc, text.substring(0, start + BEGIN.length()) + "\n\n" + generated + "\n\n" + text.substring(end));
            return;
        }
        assertEquals(generated, text.substring(start + BEGIN.length(), end).strip(),
                "docs/configuration.md disagrees with TiersConf.SETTINGS (SLIPSTREAM_BLESS=1 regenerates it)");
    }
}
