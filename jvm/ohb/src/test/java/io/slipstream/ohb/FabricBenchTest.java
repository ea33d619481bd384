package io.slipstream.ohb;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

@Timeout(value = 120, unit = TimeUnit.SECONDS)
class FabricBenchTest {

    @Test
    void options() {
        FabricBench.Options o = FabricBench.Options.parse(new String[] {"bw", "--sizes", "8,4k,1m", "--iterations", "10"});
        assertEquals(List.of(8, 4096, 1 << 20), java.util.Arrays.stream(o.sizes).boxed().toList());
        assertEquals(10, o.iterations);
        assertEquals(1, o.warmup);
        // Per size unless --window is given, as the Rust ohb: wide for small messages, narrow for large.
        assertEquals(0, o.window);
        assertEquals(32, o.windowFor(8));
        assertEquals(8, o.windowFor(1 << 20));
        assertEquals(4, o.windowFor(4 << 20));
        FabricBench.Options rate = FabricBench.Options.parse(new String[] {"rate"});
        assertEquals(64, rate.windowFor(8));
        assertEquals(64, rate.windowFor(4096));
        assertEquals(8, rate.windowFor(1 << 20));
        FabricBench.Options fixed = FabricBench.Options.parse(new String[] {"rate", "--window", "5"});
        assertEquals(5, fixed.windowFor(8));
        assertEquals(5, fixed.windowFor(1 << 20));
        assertThrows(IllegalArgumentException.class, () -> FabricBench.Options.parse(new String[] {"bw", "--window", "-1"}));
        assertThrows(IllegalArgumentException.class, () -> FabricBench.Options.parse(new String[] {"fast"}));
        assertThrows(IllegalArgumentException.class,
                () -> FabricBench.Options.parse(new String[] {"lat", "--variants", "carrier-pigeon"}));
        assertThrows(IllegalArgumentException.class, () -> FabricBench.Options.parse(new String[] {"lat", "--sizes"}));
    }

    @Test
    void streamPointsAreTheMedianTrial() {
        assertEquals(3, FabricBench.Options.parse(new String[] {"rate"}).trials);
        assertEquals(5, FabricBench.Options.parse(new String[] {"rate", "--trials", "5"}).trials);
        assertThrows(IllegalArgumentException.class, () -> FabricBench.Options.parse(new String[] {"rate", "--trials", "0"}));
        FabricBench.Point slow = new FabricBench.Point(8, 100, null, null, null, 1.0, 100.0, 64);
        FabricBench.Point middle = new FabricBench.Point(8, 100, null, null, null, 2.0, 200.0, 64);
        FabricBench.Point fast = new FabricBench.Point(8, 100, null, null, null, 9.0, 900.0, 64);
        assertEquals(middle, FabricBench.medianByRate(new FabricBench.Point[] {fast, slow, middle}));
        assertEquals(slow, FabricBench.medianByRate(new FabricBench.Point[] {fast, slow}));
        assertEquals(fast, FabricBench.medianByRate(new FabricBench.Point[] {fast}));
    }

    /** The warm-up ends after two rounds in a row not more than 5 % above the best round before each. */
    @Test
    void theWarmUpEndsWhenTheRateStopsRising() {
        assertEquals(10.0, FabricBench.Options.parse(new String[] {"rate"}).variantWarmupMaxSeconds);
        assertEquals(3.0, FabricBench.Options.parse(new String[] {"rate", "--variant-warmup-max-seconds", "3"})
                .variantWarmupMaxSeconds);
        assertThrows(IllegalArgumentException.class,
                () -> FabricBench.Options.parse(new String[] {"rate", "--variant-warmup-max-seconds", "-1"}));
        assertFalse(FabricBench.isSteady(List.of()));
        assertFalse(FabricBench.isSteady(List.of(100.0, 100.0)), "two rounds: only one compared");
        assertTrue(FabricBench.isSteady(List.of(100.0, 105.0, 90.0)));
        assertFalse(FabricBench.isSteady(List.of(100.0, 106.0, 90.0)), "the first compared round rose");
        assertFalse(FabricBench.isSteady(List.of(100.0, 90.0, 106.0)), "the last round rose");
        assertFalse(FabricBench.isSteady(List.of(300.0, 600.0, 500.0)));
        assertTrue(FabricBench.isSteady(List.of(300.0, 600.0, 500.0, 620.0)));
        assertFalse(FabricBench.isSteady(List.of(300.0, 600.0, 500.0, 640.0)));
    }

    /** A stream looks at the clock on its first send and every 64th after: not on the others, past the deadline or not. */
    @Test
    void streamsReadTheClockEvery64Sends() {
        long gone = System.nanoTime() - 1;
        long ahead = System.nanoTime() + 60_000_000_000L;
        assertTrue(BenchClient.past(gone, 0));
        assertFalse(BenchClient.past(gone, 1));
        assertFalse(BenchClient.past(gone, 63));
        assertTrue(BenchClient.past(gone, 64));
        assertFalse(BenchClient.past(ahead, 0));
        assertFalse(BenchClient.past(ahead, 128));
    }

    @Test
    void percentilesAreNearestRank() {
        long[] sorted = new long[100];
        for (int i = 0; i < 100; i++) {
            sorted[i] = i + 1;
        }
        assertEquals(50, FabricBench.percentile(sorted, 0.50));
        assertEquals(99, FabricBench.percentile(sorted, 0.99));
        assertEquals(7, FabricBench.percentile(new long[] {7}, 0.99));
    }

    @Test
    void jsonQuoting() {
        assertEquals("\"a\\\"b\\\\c\\n\\u0001\"", FabricBench.quote("a\"b\\c\n\u0001"));
    }

    /** Every mode against a real server JVM, tiny: the JSON has every variant, every point, no error. */
    @Test
    void smokeRunOfEveryMode(@TempDir Path directory) throws Exception {
        for (String mode : List.of("lat", "bw", "rate")) {
            Path json = directory.resolve(mode + ".json");
            FabricBench.main(new String[] {mode, "--sizes", "8,65536", "--iterations", "200", "--warmup", "20",
                "--window", "4", "--variant-warmup-seconds", "0.1", "--variant-warmup-max-seconds", "0.3",
                "--max-seconds-per-point", "5",
                "--json", json.toString()});
            String text = Files.readString(json);
            assertTrue(text.startsWith("{\"bench\":\"fabric " + mode + "\",\"layer\":\"jvm\""), text);
            assertTrue(text.contains("\"units\":{\"lat\":\"us, round trip\",\"bw\":\"MB/s, MB = 10^6 bytes\"}"), text);
            assertTrue(text.contains("\"machine\":{\"cpus\":" + Runtime.getRuntime().availableProcessors() + ","), text);
            assertFalse(text.contains("\"error\""), text);
            for (String variant : FabricBench.VARIANTS) {
                assertTrue(text.contains("{\"name\":\"" + variant + "\",\"points\":["), text);
            }
            Matcher points = Pattern.compile("\\{\"size_bytes\":(\\d+),\"iterations\":(\\d+),\"lat_us_min\":([^,]+),"
                    + "\"lat_us_p50\":([^,]+),\"lat_us_p99\":([^,]+),\"bw_mb_s\":([^,]+),\"msg_rate\":([^,}]+)(,\"window\":4)?}")
                    .matcher(text);
            int count = 0;
            while (points.find()) {
                count++;
                assertEquals("200", points.group(2), text);
                boolean lat = mode.equals("lat");
                assertEquals(lat, !points.group(4).equals("null"), text);
                assertEquals(lat, points.group(6).equals("null"), text);
                assertEquals(lat, points.group(7).equals("null"), text);
                assertEquals(lat, points.group(8) == null, text);
            }
            assertEquals(6, count, text);
        }
    }

    /**
     * A variant that fails makes the bench exit with {@link FabricBench#POINTS_FAILED_EXIT} after writing its JSON
     * (which names the failure): UCX limited to a transport that does not exist cannot start the fabric.
     */
    @Test
    void aFailedVariantExitsNonZero(@TempDir Path directory) throws Exception {
        Path json = directory.resolve("lat.json");
        String java = System.getProperty("java.home") + "/bin/java";
        ProcessBuilder builder = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
                FabricBench.class.getName(), "lat", "--sizes", "8", "--iterations", "100", "--variants", "fabric",
                "--variant-warmup-seconds", "0.1", "--max-seconds-per-point", "5", "--json", json.toString());
        builder.environment().put("UCX_TLS", "no-such-transport");
        builder.redirectErrorStream(true);
        Process process = builder.start();
        String output = new String(process.getInputStream().readAllBytes());
        assertTrue(process.waitFor(100, TimeUnit.SECONDS), output);
        assertEquals(FabricBench.POINTS_FAILED_EXIT, process.exitValue(), output);
        assertTrue(output.contains("FabricBench: 1 failure(s):"), output);
        assertTrue(output.contains("  fabric: "), output);
        assertTrue(Files.readString(json).contains("\"error\":"), Files.readString(json));
    }

    @Test
    void failuresNameTheVariant() {
        assertEquals(List.of("fabric-tcp: boom"), FabricBench.failures(java.util.Map.of("fabric-tcp", "boom")));
        assertTrue(FabricBench.failures(java.util.Map.of()).isEmpty());
    }
}
