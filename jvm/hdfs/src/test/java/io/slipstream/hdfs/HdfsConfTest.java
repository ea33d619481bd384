package io.slipstream.hdfs;

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

class HdfsConfTest {
    static final String BEGIN = "<!-- generated from HdfsConf.SETTINGS: do not edit by hand -->";
    static final String END = "<!-- end of HDFS section -->";

    @Test
    void defaultsParseAndBadValuesAreRefusedByName() {
        HdfsConf defaults = new HdfsConf(new Configuration(false));
        assertEquals(4 << 20, defaults.requestBytes);
        assertEquals(9876, defaults.port);
        String[][] bad = {
            {HdfsConf.FALLBACK.key(), "sometimes"},
            {HdfsConf.TRANSPORT.key(), "carrier-pigeon"},
            {HdfsConf.PORT.key(), "0"},
            {HdfsConf.SERVER_THREADS.key(), "65"},
            {HdfsConf.REQUEST_BYTES.key(), "1k"},
            {HdfsConf.REQUEST_BYTES.key(), "65m"},
            {HdfsConf.SERVER_MAX_BYTES_IN_FLIGHT.key(), "1m"},
            {HdfsConf.REQUEST_TIMEOUT_MS.key(), "0"},
        };
        for (String[] setting : bad) {
            Configuration conf = new Configuration(false);
            conf.set(setting[0], setting[1]);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new HdfsConf(conf));
            assertTrue(e.getMessage().contains(setting[0]), e.getMessage());
        }
    }

    /** docs/configuration.md's HDFS table is generated from HdfsConf.SETTINGS (SLIPSTREAM_BLESS=1 regenerates it). */
    @Test
    void configurationDocumentMatchesTheDeclarations() throws Exception {
        Set<String> declared = new HashSet<>();
        HdfsConf.SETTINGS.forEach(s -> declared.add(s.key()));
        Matcher keys = Pattern.compile("PREFIX \\+ \"([a-zA-Z.]+)\"").matcher(
                Files.readString(Path.of("src/main/java/io/slipstream/hdfs/HdfsConf.java")));
        int found = 0;
        while (keys.find()) {
            found++;
            assertTrue(declared.contains(HdfsConf.PREFIX + keys.group(1)), keys.group(1) + " is not in SETTINGS");
        }
        assertEquals(HdfsConf.SETTINGS.size(), found, "every declared setting appears once in the source");
        Path doc = Path.of("../../docs/configuration.md");
        String text = Files.readString(doc);
        int start = text.indexOf(BEGIN);
        int end = text.indexOf(END, Math.max(start, 0));
        assertTrue(start >= 0 && end > start, "docs/configuration.md lacks the generated HDFS section");
        String generated = Setting.markdownTable(HdfsConf.SETTINGS).strip();
        if (System.getenv("SLIPSTREAM_BLESS") != null) {
            Files.writeString(doc, text.substring(0, start + BEGIN.length()) + "\n\n" + generated + "\n\n" + text.substring(end));
            return;
        }
        assertEquals(generated, text.substring(start + BEGIN.length(), end).strip(),
                "docs/configuration.md disagrees with HdfsConf.SETTINGS (SLIPSTREAM_BLESS=1 regenerates it)");
    }
}
