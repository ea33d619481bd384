package io.slipstream.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricTransport;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.SparkConf;
import org.junit.jupiter.api.Test;

class SlipstreamConfTest {
    @Test
    void defaults_follow_spark_s_fetch_settings() {
        SlipstreamConf conf = new SlipstreamConf(new SparkConf(false));
        assertEquals(SlipstreamConf.Fallback.AUTO, conf.fallback);
        assertEquals(FabricTransport.AUTO, conf.transport);
        assertEquals(48L << 20, conf.maxBytesInFlight);
        assertEquals((8 << 20) - io.slipstream.shuffle.BlockFetcher.Limits.RESPONSE_HEADROOM_BYTES, conf.requestBytesMax, "a fifth, within an 8 MiB buffer");
        assertEquals(Integer.MAX_VALUE, conf.maxRequestsInFlight);
        assertTrue(conf.maxMessageBytes() > conf.requestBytesMax);
    }

    @Test
    void spark_s_unsuffixed_max_size_in_flight_is_mebibytes_and_settings_are_checked() {
        SlipstreamConf conf = new SlipstreamConf(new SparkConf(false).set("spark.reducer.maxSizeInFlight", "10")
                .set("spark.reducer.maxReqsInFlight", "3").set("spark.slipstream.transport", "TCP").set("spark.slipstream.fallback", "never"));
        assertEquals(10L << 20, conf.maxBytesInFlight);
        assertEquals(3, conf.maxRequestsInFlight);
        assertEquals(FabricTransport.TCP, conf.transport);
        assertEquals(SlipstreamConf.Fallback.NEVER, conf.fallback);
        assertThrows(IllegalArgumentException.class, () -> new SlipstreamConf(new SparkConf(false).set("spark.slipstream.fallback", "sometimes")));
        assertThrows(IllegalArgumentException.class, () -> new SlipstreamConf(new SparkConf(false)
                .set("spark.slipstream.buffer.cap", "64m").set("spark.slipstream.cache.size", "48m")));
        assertThrows(IllegalArgumentException.class, () -> new SlipstreamConf(new SparkConf(false).set("spark.slipstream.server.threads", "0")));
    }

    @Test
    void requests_fit_power_of_two_buffers_and_stay_within_a_fifth_of_the_window() {
        for (long window : new long[] {1 << 20, 10L << 20, 48L << 20, 96L << 20, 1L << 30, 64L << 30}) {
            int request = io.slipstream.shuffle.BlockFetcher.Limits.requestBytesFor(window);
            assertTrue(request >= 64 << 10 && request <= 64 << 20, window + ": " + request);
            assertTrue(window < 640 << 10 || request <= window / 5, window + ": " + request + " above a fifth");
            long sizeClass = request + (long) io.slipstream.shuffle.BlockFetcher.Limits.RESPONSE_HEADROOM_BYTES;
            assertEquals(1, Long.bitCount(sizeClass), window + ": " + request + " is not a power of two less the headroom");
            assertTrue(request + 4 + 12L * 4096 <= sizeClass, window + ": a full response spills into the next size class");
        }
    }

    static final String BEGIN = "<!-- generated from SlipstreamConf.SETTINGS: do not edit by hand -->";
    static final String END = "<!-- end of generated section -->";

    /** The table docs/configuration.md shows, from the declarations. */
    static String settingsTable() {
        return io.slipstream.shuffle.Setting.markdownTable(SlipstreamConf.SETTINGS);
    }

    @Test
    void the_fabric_listens_on_the_device_of_spark_s_bind_address_not_on_all() throws Exception {
        SlipstreamConf conf = new SlipstreamConf(new SparkConf(false));
        assertEquals("lo", conf.netDevicesFor("127.0.0.1"));
        assertEquals("lo", conf.netDevicesFor("127.0.0.2"), "the rest of 127/8 is on lo too");
        assertEquals("all", conf.netDevicesFor("0.0.0.0"), "Spark binds every device: so does the fabric");
        int addresses = 0;
        for (java.net.NetworkInterface device : java.util.Collections.list(java.net.NetworkInterface.getNetworkInterfaces())) {
            for (java.net.InetAddress address : java.util.Collections.list(device.getInetAddresses())) {
                if (address instanceof java.net.Inet4Address && !address.isLoopbackAddress()) {
                    String devices = conf.netDevicesFor(address.getHostAddress());
                    assertEquals(device.getName(), devices.split(",")[0], address.toString());
                    addresses++;
                }
            }
        }
        System.out.println("non-loopback IPv4 addresses checked: " + addresses);
        // A documentation address (RFC 5737) on no device here; resolving a literal sends nothing.
        String elsewhere = null;
        for (String candidate : new String[] {"198.51.100.77", "203.0.113.77", "192.0.2.77"}) {
            if (java.net.NetworkInterface.getByInetAddress(java.net.InetAddress.getByName(candidate)) == null) {
                elsewhere = candidate;
                break;
            }
        }
        assertTrue(elsewhere != null, "every candidate address is on a device of this host");
        String address = elsewhere;
        IllegalArgumentException nowhere = assertThrows(IllegalArgumentException.class, () -> conf.netDevicesFor(address));
        assertTrue(nowhere.getMessage().contains("spark.slipstream.netDevices"), nowhere.getMessage());
        assertEquals("mlx5_0:1", new SlipstreamConf(new SparkConf(false).set("spark.slipstream.netDevices", "mlx5_0:1"))
                .netDevicesFor("127.0.0.1"));
    }

    @Test
    void a_block_s_bound_follows_spark_s_map_status_encoding() {
        SlipstreamConf conf = new SlipstreamConf(new SparkConf(false));
        assertEquals(1000 + 125 + (64 << 10), conf.blockBytesBound(1000, 200), "CompressedMapStatus: rounded up, at most 10 %");
        assertEquals(100L << 20, conf.blockBytesBound(1000, 2001), "HighlyCompressedMapStatus: small blocks are averages");
        assertEquals((1L << 30) + (1L << 27) + (64 << 10), conf.blockBytesBound(1L << 30, 2001));
        assertEquals(io.slipstream.shuffle.BlockFetcher.BLOCK_BYTES_MAX, conf.blockBytesBound(3L << 30, 10));
        SlipstreamConf lower = new SlipstreamConf(new SparkConf(false).set("spark.shuffle.accurateBlockThreshold", "1m")
                .set("spark.shuffle.minNumPartitionsToHighlyCompress", "10"));
        assertEquals(1L << 20, lower.blockBytesBound(1000, 11));
    }

    /**
     * docs/configuration.md's Spark table is generated from SlipstreamConf.SETTINGS, and every
     * spark.slipstream.* key the code reads is declared there. Regenerate the document with
     * SLIPSTREAM_BLESS=1.
     */
    @Test
    void configuration_document_matches_the_declarations() throws Exception {
        String source = Files.readString(Path.of("src/main/java/io/slipstream/spark/SlipstreamConf.java"));
        Matcher keys = Pattern.compile("\"(spark\\.slipstream\\.[a-zA-Z.]+)\"").matcher(source);
        java.util.Set<String> declared = new java.util.HashSet<>();
        SlipstreamConf.SETTINGS.forEach(s -> declared.add(s.key()));
        int found = 0;
        while (keys.find()) {
            String key = keys.group(1);
            if (key.equals(SlipstreamConf.DIRECTORY_ADDRESS)) {
                continue; // set by the driver for the executors, not by users
            }
            found++;
            assertTrue(declared.contains(key), key + " is read but not declared in SlipstreamConf.SETTINGS");
        }
        assertEquals(SlipstreamConf.SETTINGS.size(), found, "every declared setting appears once in the source");
        Path doc = Path.of("../../docs/configuration.md");
        String text = Files.readString(doc);
        int start = text.indexOf(BEGIN);
        int end = text.indexOf(END, Math.max(start, 0));
        assertTrue(start >= 0 && end > start, "docs/configuration.md lacks the generated Spark section");
        String current = text.substring(start + BEGIN.length(), end).strip();
        String generated = settingsTable().strip();
        if (System.getenv("SLIPSTREAM_BLESS") != null) {
            Files.writeString(doc, text.substring(0, start + BEGIN.length()) + "\n\n" + generated + "\n\n" + text.substring(end));
            return;
        }
        assertEquals(generated, current, "docs/configuration.md disagrees with SlipstreamConf.SETTINGS (SLIPSTREAM_BLESS=1 regenerates it)");
    }
}
