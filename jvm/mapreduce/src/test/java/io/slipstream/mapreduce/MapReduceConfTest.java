package io.slipstream.mapreduce;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.shuffle.Setting;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;

/** The plugin's settings: defaults, limits, devices, and the document generated from them. */
class MapReduceConfTest {
    static final String BEGIN = "<!-- generated from MapReduceConf.SETTINGS: do not edit by hand -->";
    static final String END = "<!-- end of generated section -->";

    @Test
    void defaults_are_the_declared_ones() {
        MapReduceConf conf = new MapReduceConf(new Configuration(false));
        assertEquals(MapReduceConf.Fallback.AUTO, conf.fallback);
        assertEquals(13564, conf.port);
        assertEquals("127.0.0.1", conf.bindAddress);
        assertEquals(256L << 20, conf.bufferCapBytes);
        assertEquals(48L << 20, conf.maxBytesInFlight);
        assertEquals(64, conf.maxRequestsInFlight);
        assertEquals(60_000, conf.requestTimeout.toMillis());
        assertEquals("lo", conf.netDevicesFor(conf.bindAddress));
        assertEquals(io.slipstream.shuffle.RequestAuthenticator.ResponseMac.HEADER, conf.responseMac);
        Configuration full = new Configuration(false);
        full.set(MapReduceConf.RESPONSE_MAC.key(), "Full");
        assertEquals(io.slipstream.shuffle.RequestAuthenticator.ResponseMac.FULL, new MapReduceConf(full).responseMac);
    }

    @Test
    void the_fabric_uses_the_device_of_its_bind_address_not_all() {
        MapReduceConf conf = new MapReduceConf(new Configuration(false));
        assertEquals("lo", conf.netDevicesFor("127.0.0.2"));
        assertEquals("all", conf.netDevicesFor("0.0.0.0"));
        Configuration set = new Configuration(false);
        set.set(MapReduceConf.NET_DEVICES.key(), "mlx5_0:1");
        assertEquals("mlx5_0:1", new MapReduceConf(set).netDevicesFor("127.0.0.1"));
    }

    @Test
    void out_of_range_settings_are_refused_with_their_key() {
        for (String[] bad : new String[][] {
            {MapReduceConf.PORT.key(), "0"},
            {MapReduceConf.SERVER_THREADS.key(), "65"},
            {MapReduceConf.MAX_BYTES_IN_FLIGHT.key(), "200m"},
            {MapReduceConf.FALLBACK.key(), "sometimes"},
            {MapReduceConf.RESPONSE_MAC.key(), "none"},
        }) {
            Configuration conf = new Configuration(false);
            conf.set(bad[0], bad[1]);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new MapReduceConf(conf));
            assertTrue(e.getMessage().contains(bad[0]), e.getMessage());
        }
    }

    /**
     * docs/configuration.md's MapReduce table is generated from MapReduceConf.SETTINGS, and every
     * slipstream.mapreduce.* key is declared there. Regenerate the document with SLIPSTREAM_BLESS=1.
     */
    @Test
    void configuration_document_matches_the_declarations() throws Exception {
        Set<String> declared = new HashSet<>();
        MapReduceConf.SETTINGS.forEach(s -> declared.add(s.key()));
        Matcher keys = Pattern.compile("PREFIX \\+ \"([a-zA-Z.]+)\"").matcher(
                Files.readString(Path.of("src/main/java/io/slipstream/mapreduce/MapReduceConf.java")));
        int found = 0;
        while (keys.find()) {
            found++;
            assertTrue(declared.contains(MapReduceConf.PREFIX + keys.group(1)), keys.group(1) + " is not in SETTINGS");
        }
        assertEquals(MapReduceConf.SETTINGS.size(), found, "every declared setting appears once in the source");
        Path doc = Path.of("../../docs/configuration.md");
        String text = Files.readString(doc);
        int start = text.indexOf(BEGIN);
        int end = text.indexOf(END, Math.max(start, 0));
        assertTrue(start >= 0 && end > start, "docs/configuration.md lacks the generated MapReduce section");
        String generated = Setting.markdownTable(MapReduceConf.SETTINGS).strip();
        if (System.getenv("SLIPSTREAM_BLESS") != null) {
            Files.writeString(doc, text.substring(0, start + BEGIN.length()) + "\n\n" + generated + "\n\n" + text.substring(end));
            return;
        }
        assertEquals(generated, text.substring(start + BEGIN.length(), end).strip(),
                "docs/configuration.md disagrees with MapReduceConf.SETTINGS (SLIPSTREAM_BLESS=1 regenerates it)");
    }
}
