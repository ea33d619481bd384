package io.slipstream.ohb.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;

/**
 * The applications end to end in local mode (one JVM, no Spark home needed): the listener sees the measured
 * stages, the checksums do not depend on the serializer. `ohb spark` runs them on a local cluster.
 */
class ShuffleBenchLocalTest {
    private static String run(String... args) throws Exception {
        String[] all = new String[args.length + 6];
        System.arraycopy(args, 0, all, 0, args.length);
        System.arraycopy(new String[] {"--master", "local[2]", "--conf", "spark.ui.enabled=false", "--conf",
            "spark.driver.host=127.0.0.1"}, 0, all, args.length, 6);
        return ShuffleBench.run(BenchParams.parse(all));
    }

    private static String text(String json, String field) {
        Matcher m = Pattern.compile("\"" + field + "\":(\"[^\"]*\"|[^,}\\]]*)").matcher(json);
        assertTrue(m.find(), field + " in " + json);
        return m.group(1).replace("\"", "");
    }

    private static long number(String json, String field) {
        return Long.parseLong(text(json, field));
    }

    @Test
    void groupByChecksumDoesNotDependOnTheSerializer() throws Exception {
        String kryo = run("groupby", "--mappers", "3", "--pairs", "2000", "--value-bytes", "100", "--reducers", "4",
                "--conf", "spark.serializer=org.apache.spark.serializer.KryoSerializer");
        String java = run("groupby", "--mappers", "3", "--pairs", "2000", "--value-bytes", "100", "--reducers", "4");
        for (String json : new String[] {kryo, java}) {
            assertEquals(6000, number(json, "records"));
            assertEquals(6000, number(json, "records_read"));
            assertEquals(6000, number(json, "shuffle_records_written"));
            assertEquals(3, number(json, "input_cached_partitions"));
            assertEquals(2, number(json, "stage_attempts"));
            assertTrue(number(json, "shuffle_write_bytes") > 600_000, json);
            assertTrue(number(json, "job_ns") > 0, json);
            assertEquals("true", text(json, "stages_completed"));
            assertEquals("sort", text(json, "shuffle_manager"));
            assertEquals("null", text(json, "fabric_remote_bytes"), "vanilla Spark has no fabric counters: " + json);
            assertEquals("null", text(json, "fabric_pool_peak_bytes"), json);
            assertEquals(0, number(json, "fabric_counting_executors"));
            assertEquals(1, number(json, "executors_probed"), "local mode: the driver is the executor");
        }
        assertEquals(text(kryo, "checksum"), text(java, "checksum"));
        assertEquals(text(kryo, "groups"), text(java, "groups"));
    }

    @Test
    void sortByIsOrderedAndCountsItsSamplingStage() throws Exception {
        String json = run("sortby", "--mappers", "2", "--pairs", "3000", "--value-bytes", "16", "--reducers", "3");
        assertEquals("true", text(json, "ordered"));
        assertEquals(0, number(json, "inversions"));
        assertEquals(6000, number(json, "records"));
        assertEquals(3, number(json, "stage_attempts"), "sampling, map, reduce: " + json);
        assertTrue(json.contains("\"kind\":\"other\"") && json.contains("\"kind\":\"map\"")
                && json.contains("\"kind\":\"reduce\""), json);
    }
}
