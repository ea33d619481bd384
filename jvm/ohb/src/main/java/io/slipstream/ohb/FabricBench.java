package io.slipstream.ohb;

import io.slipstream.fabric.FabricTransport;
import io.slipstream.fabric.FabricUnavailableException;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The JVM variant of the ohb benchmarks: the fabric from Java with default transports
 * ({@code fabric}), with forced TCP ({@code fabric-tcp}), and blocking {@code java.net.Socket}
 * ({@code java-socket}), side by side in one run, against a server in a second JVM
 * ({@link FabricBenchServer}, started here with the same class path) on 127.0.0.1.
 *
 * <pre>
 * java -cp jvm/ohb/target/slipstream-ohb.jar io.slipstream.ohb.FabricBench &lt;lat|bw|rate&gt;
 *     [--sizes 8,64,...,4194304] [--iterations N] [--warmup N] [--window N]
 *     [--variants fabric,fabric-tcp,java-socket] [--max-seconds-per-point S] [--json FILE]
 *     [--variant-warmup-seconds S] [--variant-warmup-max-seconds S] [--spin-us US] [--handler-threads N]
 *     [--batch N] [--trials N]
 * </pre>
 *
 * <ul>
 * <li>{@code lat}: ping-pong, {@code size} bytes each way, one at a time; round trip min/p50/p99 in us.</li>
 * <li>{@code bw}: the client streams {@code size}-byte requests with a window of requests in flight
 *     ({@code --window}, else per size as the Rust ohb: 32 below 256 KiB, 8 up to 1 MiB, 4 above), the
 *     server answers each with an 8-byte ack; MB/s (1 MB = 10^6 bytes) and messages/s.</li>
 * <li>{@code rate}: as {@code bw}, for small messages (default 8 bytes); messages/s.</li>
 * <li>{@code --trials N} (bw and rate; default 3): timed runs of {@code --iterations} each per point; the
 *     run with the median message rate is reported; the runs share the point's {@code --max-seconds-per-point}.</li>
 * <li>{@code --batch N} (bw and rate, fabric variants; default 1): the client sends {@code N} requests
 *     per native call ({@code FabricEndpoint.requestAsync(op, List)}) once {@code N} fit in the window.</li>
 * </ul>
 * Each variant first runs the first size's traffic for {@code --variant-warmup-seconds} (default 2),
 * then in rounds of {@value #WARMUP_ROUND_SECONDS} s until two rounds in a row do not rise above the best
 * round before them by more than {@value #WARMUP_STEADY_GAIN} (or {@code --variant-warmup-max-seconds}, default
 * 10, passed), so that JIT compilation and connection set-up are not measured; each point then has its
 * own warm-up of {@code --warmup} iterations (default a tenth of {@code --iterations}, at most 1000).
 * Every point's loop is bounded in count ({@code --iterations}) and time ({@code --max-seconds-per-point}),
 * the warm-up in time;
 * a point cut short by time reports the iterations it did. Progress goes to stderr, the table to
 * stdout, and the results to {@code --json} in the schema shared with the Rust ohb:
 * {@code {"bench":"fabric lat","layer":"jvm","units":{..},"machine":{..},"variants":[{"name":"fabric",
 * "points":[{"size_bytes":8,"iterations":N,"lat_us_min":..,"lat_us_p50":..,"lat_us_p99":..,"bw_mb_s":..,
 * "msg_rate":..}]}]}}; fields a mode does not measure are null; bw and rate points add {@code window};
 * {@code units.bw} declares MB = 10^6 bytes. A variant that cannot run (the fabric unavailable, a
 * failure mid-run) keeps the points it has and carries an {@code "error"} string.
 */
public final class FabricBench {
    static final List<String> VARIANTS = List.of("fabric", "fabric-tcp", "java-socket");
    /** Declared in the JSON ({@code units.bw}): the Rust ohb converts to its own MB. */
    static final String BW_UNIT = "MB/s, MB = 10^6 bytes";

    private FabricBench() {
    }

    /** One measured point; null fields were not measured in this mode. */
    record Point(int sizeBytes, long iterations, Double latUsMin, Double latUsP50, Double latUsP99, Double bwMbS,
            Double msgRate, Integer window) {
    }

    static final class Options {
        String mode;
        int[] sizes;
        long iterations;
        long warmup = -1;
        /** Requests in flight for bw and rate; 0: per size ({@link #windowFor}). */
        int window;
        List<String> variants = VARIANTS;
        double maxSecondsPerPoint = 10;
        Path json;
        int handlerThreads = 2;
        /** Passed to both sides' fabric nodes; null keeps the fabric's default. */
        Long spinUs;
        /** Requests per native call in the fabric variants' bw and rate streams (1: one call each). */
        int batch = 1;
        /** Before a variant's first point: JIT, connection wire-up, pool warm. */
        double variantWarmupSeconds = 2;
        /**
         * The most a variant's warm-up runs while its rate still rises: on two cores the fabric's JVM
         * code reached C2 only 2 to 3 s after the JVM started (compiler threads wait for the spinning
         * ones), and the first point after a 2 s warm-up ran at 0.5x to 0.7x of the later ones, while
         * Java sockets' did not move (docs/fabric.md, "The JVM bench's warm-up").
         */
        double variantWarmupMaxSeconds = 10;
        /**
         * Timed runs per bw/rate point, the median reported (as the Rust ohb does): one run of a few
         * hundred milliseconds through the JVM swings by 2x to 3x with where a young collection or a
         * preempted spinner falls (docs/fabric.md, "Where the JVM bridge's time goes").
         */
        int trials = 3;

        static Options parse(String[] args) {
            if (args.length == 0 || args[0].startsWith("-")) {
                throw new IllegalArgumentException("first argument: lat, bw or rate");
            }
            Options o = new Options();
            o.mode = args[0];
            switch (o.mode) {
                case "lat" -> {
                    o.sizes = new int[] {8, 64, 512, 4096, 32768, 262144, 1048576, 4194304};
                    o.iterations = 2000;
                }
                case "bw" -> {
                    o.sizes = new int[] {4096, 65536, 1048576, 4194304};
                    o.iterations = 2000;
                }
                case "rate" -> {
                    o.sizes = new int[] {8};
                    o.iterations = 50_000;
                }
                default -> throw new IllegalArgumentException("unknown mode " + o.mode + ": lat, bw or rate");
            }
            for (int i = 1; i < args.length; i++) {
                String flag = args[i];
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException(flag + " needs a value");
                }
                String value = args[++i];
                switch (flag) {
                    case "--sizes" -> o.sizes = Arrays.stream(value.split(",")).map(String::trim)
                            .mapToInt(FabricBench::parseSize).toArray();
                    case "--iterations" -> o.iterations = Long.parseLong(value);
                    case "--warmup" -> o.warmup = Long.parseLong(value);
                    case "--window" -> o.window = Integer.parseInt(value);
                    case "--variants" -> o.variants = List.of(value.split(","));
                    case "--max-seconds-per-point" -> o.maxSecondsPerPoint = Double.parseDouble(value);
                    case "--json" -> o.json = Path.of(value);
                    case "--handler-threads" -> o.handlerThreads = Integer.parseInt(value);
                    case "--spin-us" -> o.spinUs = Long.parseLong(value);
                    case "--batch" -> o.batch = Integer.parseInt(value);
                    case "--variant-warmup-seconds" -> o.variantWarmupSeconds = Double.parseDouble(value);
                    case "--variant-warmup-max-seconds" -> o.variantWarmupMaxSeconds = Double.parseDouble(value);
                    case "--trials" -> o.trials = Integer.parseInt(value);
                    default -> throw new IllegalArgumentException("unknown option " + flag);
                }
            }
            if (o.warmup < 0) {
                o.warmup = Math.min(o.iterations / 10, 1000);
            }
            for (int size : o.sizes) {
                if (size < 0 || size > BenchProtocol.SIZE_MAX) {
                    throw new IllegalArgumentException("size " + size + " outside 0.." + BenchProtocol.SIZE_MAX);
                }
            }
            for (String variant : o.variants) {
                if (!VARIANTS.contains(variant)) {
                    throw new IllegalArgumentException("unknown variant " + variant + "; known: " + VARIANTS);
                }
            }
            if (o.batch < 1 || o.batch > io.slipstream.fabric.FabricEndpoint.BATCH_MAX) {
                throw new IllegalArgumentException("batch must be in 1.." + io.slipstream.fabric.FabricEndpoint.BATCH_MAX);
            }
            if (o.iterations <= 0 || o.maxSecondsPerPoint <= 0 || o.window < 0) {
                throw new IllegalArgumentException("iterations, window and max seconds must be positive");
            }
            if (!(o.variantWarmupSeconds >= 0) || !(o.variantWarmupMaxSeconds >= 0)) {
                throw new IllegalArgumentException("warm-up seconds must not be negative");
            }
            if (o.trials < 1 || o.trials > 100) {
                throw new IllegalArgumentException("trials must be in 1..100");
            }
            return o;
        }

        /** The window for {@code size}: {@code --window}, or the Rust ohb's default for the mode and size. */
        int windowFor(int size) {
            if (window > 0) {
                return window;
            }
            if (size < 256 << 10) {
                return mode.equals("rate") ? 64 : 32;
            }
            return size <= 1 << 20 ? 8 : 4;
        }
    }

    public static void main(String[] args) throws Exception {
        Options options;
        try {
            options = Options.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("error: " + e.getMessage());
            System.err.println("usage: FabricBench <lat|bw|rate> [--sizes 8,64,...] [--iterations N] [--warmup N] "
                    + "[--window N] [--variants fabric,fabric-tcp,java-socket] [--max-seconds-per-point S] [--json FILE] [--trials N]");
            System.exit(2);
            return;
        }
        Process server = startServer(options);
        Map<String, List<Point>> results = new LinkedHashMap<>();
        Map<String, String> errors = new LinkedHashMap<>();
        try {
            Map<String, String> ports = awaitReady(server);
            for (String variant : options.variants) {
                List<Point> points = new ArrayList<>();
                results.put(variant, points);
                String port = ports.get(variant);
                if (port == null || port.equals("unavailable")) {
                    errors.put(variant, "the server could not start this variant (fabric unavailable)");
                    progress("%s: skipped, %s", variant, errors.get(variant));
                    continue;
                }
                InetSocketAddress address = new InetSocketAddress("127.0.0.1", Integer.parseInt(port));
                try (BenchClient client = connect(variant, address, options)) {
                    client.verify(4096);
                    warmUp(client, variant, options);
                    for (int size : options.sizes) {
                        Point point = options.mode.equals("lat") ? latency(client, size, options) : stream(client, size, options);
                        points.add(point);
                        progress("%-11s %s", variant, describe(point));
                    }
                } catch (FabricUnavailableException e) {
                    errors.put(variant, "fabric unavailable: " + e.getMessage());
                    progress("%s: skipped, %s", variant, errors.get(variant));
                } catch (Exception e) {
                    errors.put(variant, e.toString());
                    progress("%s: failed: %s", variant, e);
                }
            }
        } finally {
            stopServer(server);
        }
        printTable(options, results);
        if (options.json != null) {
            Files.writeString(options.json, toJson(options, results, errors), StandardCharsets.UTF_8);
            progress("results written to %s", options.json);
        }
        List<String> failures = failures(errors);
        if (!failures.isEmpty()) {
            System.err.println("FabricBench: " + failures.size() + " failure(s):");
            failures.forEach(f -> System.err.println("  " + f));
            System.exit(POINTS_FAILED_EXIT);
        }
    }

    /** Exit status when points or variants failed; the JSON (if asked for) is written first. */
    static final int POINTS_FAILED_EXIT = 3;

    /** Every variant that stopped or was skipped, as "VARIANT: why" (a point either completes or stops its variant). */
    static List<String> failures(Map<String, String> errors) {
        List<String> failures = new ArrayList<>();
        errors.forEach((variant, error) -> failures.add(variant + ": " + error));
        return failures;
    }

    private static BenchClient connect(String variant, InetSocketAddress server, Options options) throws Exception {
        return switch (variant) {
            case "fabric" -> new BenchClient.Fabric(FabricTransport.AUTO, server, options.spinUs, options.batch);
            case "fabric-tcp" -> new BenchClient.Fabric(FabricTransport.TCP, server, options.spinUs, options.batch);
            case "java-socket" -> new BenchClient.JavaSocket(server);
            default -> throw new IllegalArgumentException(variant);
        };
    }

    /** A steady-state round of the warm-up, seconds. */
    static final double WARMUP_ROUND_SECONDS = 0.5;
    /** A round whose rate is at most this much above the best before it ends the warm-up: 5 %. */
    static final double WARMUP_STEADY_GAIN = 0.05;
    /** Rounds in a row that must not rise above the best before them. */
    static final int WARMUP_STEADY_ROUNDS = 2;

    /**
     * Runs the first point's traffic for {@code --variant-warmup-seconds}, then in rounds until the
     * rate stops rising (at most {@code --variant-warmup-max-seconds} in all), so that no variant
     * measures its own warm-up: every variant gets the same rule, and one that is warm at once (Java
     * sockets) ends after its first two rounds.
     */
    private static void warmUp(BenchClient client, String variant, Options options) throws Exception {
        long start = System.nanoTime();
        long end = start + (long) (Math.max(options.variantWarmupSeconds, options.variantWarmupMaxSeconds) * 1e9);
        long minimum = Math.min(end, start + (long) (options.variantWarmupSeconds * 1e9));
        warmUpRound(client, options, minimum);
        List<Double> rates = new ArrayList<>();
        boolean steady = false;
        while (!steady && System.nanoTime() < end) {
            long roundStart = System.nanoTime();
            long done = warmUpRound(client, options, Math.min(end, roundStart + (long) (WARMUP_ROUND_SECONDS * 1e9)));
            double rate = done / ((System.nanoTime() - roundStart) / 1e9);
            rates.add(rate);
            steady = isSteady(rates);
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        if (rates.isEmpty()) {
            progress("%-11s warm-up %.1f s (fixed)", variant, seconds);
        } else {
            progress("%-11s warm-up %.1f s, %s, rounds of %.1f s at %s/s", variant, seconds,
                    steady ? "steady" : "still rising at its limit", WARMUP_ROUND_SECONDS,
                    rates.stream().map(r -> String.format(Locale.ROOT, "%.0fk", r / 1e3)).toList());
        }
    }

    /**
     * Whether the rounds' rates end the warm-up: neither of the last {@value #WARMUP_STEADY_ROUNDS} rose above
     * the best round before it by more than {@link #WARMUP_STEADY_GAIN} (one round of 0.5 s is noisy: a round
     * that fell proves nothing by itself).
     */
    static boolean isSteady(List<Double> rates) {
        if (rates.size() <= WARMUP_STEADY_ROUNDS) {
            return false;
        }
        for (int i = rates.size() - WARMUP_STEADY_ROUNDS; i < rates.size(); i++) {
            double best = rates.subList(0, i).stream().mapToDouble(Double::doubleValue).max().getAsDouble();
            if (rates.get(i) > best * (1 + WARMUP_STEADY_GAIN)) {
                return false;
            }
        }
        return true;
    }

    /** The first size's traffic until {@code deadline}; returns the messages (round trips, or acked requests) done. */
    private static long warmUpRound(BenchClient client, Options options, long deadline) throws Exception {
        int size = options.sizes[0];
        long count = 0;
        while (System.nanoTime() < deadline) {
            if (options.mode.equals("lat")) {
                client.echo(size);
                count++;
            } else {
                int window = options.windowFor(size);
                count += client.stream(size, Math.max(1, window * 4L), window, deadline);
            }
        }
        return count;
    }

    static Point latency(BenchClient client, int size, Options options) throws Exception {
        long deadline = deadline(options);
        for (long i = 0; i < options.warmup && System.nanoTime() < deadline; i++) {
            client.echo(size);
        }
        deadline = deadline(options);
        long[] roundTrips = new long[(int) Math.min(options.iterations, Integer.MAX_VALUE - 8)];
        int done = 0;
        while (done < roundTrips.length && System.nanoTime() < deadline) {
            long start = System.nanoTime();
            client.echo(size);
            roundTrips[done++] = System.nanoTime() - start;
        }
        long[] measured = Arrays.copyOf(roundTrips, done);
        Arrays.sort(measured);
        return new Point(size, done, micros(measured[0]), micros(percentile(measured, 0.50)),
                micros(percentile(measured, 0.99)), null, null, null);
    }

    static Point stream(BenchClient client, int size, Options options) throws Exception {
        int window = options.windowFor(size);
        client.stream(size, options.warmup, window, deadline(options));
        Point[] trials = new Point[options.trials];
        // The point's time bound is shared by its trials, so that more trials do not make a point longer.
        long trialNanos = (long) (options.maxSecondsPerPoint * 1e9 / trials.length);
        for (int trial = 0; trial < trials.length; trial++) {
            long start = System.nanoTime();
            long acked = client.stream(size, options.iterations, window, start + trialNanos);
            double seconds = (System.nanoTime() - start) / 1e9;
            double rate = acked / seconds;
            trials[trial] = new Point(size, acked, null, null, null, rate * size / 1e6, rate, window);
        }
        return medianByRate(trials);
    }

    /** The trial with the median message rate (the lower middle one of an even count). */
    static Point medianByRate(Point[] trials) {
        Point[] sorted = trials.clone();
        Arrays.sort(sorted, java.util.Comparator.comparingDouble(Point::msgRate));
        return sorted[(sorted.length - 1) / 2];
    }

    private static long deadline(Options options) {
        return System.nanoTime() + (long) (options.maxSecondsPerPoint * 1e9);
    }

    /** Nearest-rank percentile of sorted values. */
    static long percentile(long[] sorted, double p) {
        int rank = (int) Math.ceil(p * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
    }

    private static double micros(long nanos) {
        return nanos / 1000.0;
    }

    static int parseSize(String text) {
        String t = text.toLowerCase(Locale.ROOT);
        int multiplier = 1;
        if (t.endsWith("k") || t.endsWith("kib")) {
            multiplier = 1 << 10;
            t = t.substring(0, t.indexOf('k'));
        } else if (t.endsWith("m") || t.endsWith("mib")) {
            multiplier = 1 << 20;
            t = t.substring(0, t.indexOf('m'));
        }
        return Math.multiplyExact(Integer.parseInt(t), multiplier);
    }

    // -------------------------------------------------------------------------------------------
    // The server JVM.

    private static Process startServer(Options options) throws IOException {
        List<String> command = new ArrayList<>();
        command.add(System.getProperty("java.home") + File.separator + "bin" + File.separator + "java");
        command.add("-Xmx512m");
        for (String name : System.getProperties().stringPropertyNames()) {
            if (name.startsWith("slipstream.")) {
                command.add("-D" + name + "=" + System.getProperty(name));
            }
        }
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(FabricBenchServer.class.getName());
        command.add("--handler-threads");
        command.add(Integer.toString(options.handlerThreads));
        if (options.spinUs != null) {
            command.add("--spin-us");
            command.add(Long.toString(options.spinUs));
        }
        // The server outlives no run: the whole run's budget, bounded.
        long budget = (long) ((options.maxSecondsPerPoint * 2 * options.sizes.length
                + Math.max(options.variantWarmupSeconds, options.variantWarmupMaxSeconds))
                * options.variants.size()) + 120;
        command.add("--max-seconds");
        command.add(Long.toString(budget));
        return new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    private static Map<String, String> awaitReady(Process server) throws Exception {
        BufferedReader out = new BufferedReader(new InputStreamReader(server.getInputStream(), StandardCharsets.UTF_8));
        String[] line = new String[1];
        Thread reader = new Thread(() -> {
            try {
                String l;
                while ((l = out.readLine()) != null) {
                    if (l.startsWith(BenchProtocol.READY)) {
                        line[0] = l;
                        return;
                    }
                    System.err.println("server: " + l);
                }
            } catch (IOException ignored) {
                // server gone: reported below
            }
        }, "server-ready");
        reader.setDaemon(true);
        reader.start();
        reader.join(TimeUnit.SECONDS.toMillis(60));
        if (line[0] == null) {
            throw new IllegalStateException("the benchmark server did not become ready within 60 s");
        }
        Map<String, String> ports = new LinkedHashMap<>();
        for (String field : line[0].substring(BenchProtocol.READY.length()).trim().split("\\s+")) {
            String[] kv = field.split("=", 2);
            ports.put(kv[0], kv[1]);
        }
        progress("server ready: %s", ports);
        return ports;
    }

    private static void stopServer(Process server) throws InterruptedException {
        try {
            OutputStream stdin = server.getOutputStream();
            stdin.close(); // the server exits when its stdin closes
        } catch (IOException ignored) {
            // already gone
        }
        if (!server.waitFor(15, TimeUnit.SECONDS)) {
            server.destroyForcibly();
            server.waitFor(10, TimeUnit.SECONDS);
        }
    }

    // -------------------------------------------------------------------------------------------
    // Output.

    private static void progress(String format, Object... args) {
        System.err.println("[ohb-jvm] " + String.format(Locale.ROOT, format, args));
        System.err.flush();
    }

    static String describe(Point p) {
        if (p.latUsP50() != null) {
            return String.format(Locale.ROOT, "%9d B  n=%-7d min %9.2f us  p50 %9.2f us  p99 %9.2f us",
                    p.sizeBytes(), p.iterations(), p.latUsMin(), p.latUsP50(), p.latUsP99());
        }
        return String.format(Locale.ROOT, "%9d B  n=%-7d %10.1f MB/s  %12.0f msg/s", p.sizeBytes(), p.iterations(),
                p.bwMbS(), p.msgRate());
    }

    private static void printTable(Options options, Map<String, List<Point>> results) {
        System.out.println("# fabric " + options.mode + " (JVM, " + env().get("java") + ", " + env().get("os") + ", "
                + Runtime.getRuntime().availableProcessors() + " cpus)");
        for (Map.Entry<String, List<Point>> variant : results.entrySet()) {
            for (Point point : variant.getValue()) {
                System.out.println(String.format(Locale.ROOT, "%-11s %s", variant.getKey(), describe(point)));
            }
        }
    }

    /** The machine, as the Rust ohb's {@code machine} object ({@code ucx} is left to the reader, which detects it). */
    static Map<String, String> env() {
        Map<String, String> env = new LinkedHashMap<>();
        env.put("java", System.getProperty("java.vm.name") + " " + System.getProperty("java.runtime.version"));
        env.put("os", System.getProperty("os.name") + " " + System.getProperty("os.version") + " " + System.getProperty("os.arch"));
        env.put("kernel", System.getProperty("os.version"));
        env.put("model", cpuModel());
        return env;
    }

    private static String cpuModel() {
        try {
            return Files.readAllLines(Path.of("/proc/cpuinfo")).stream()
                    .filter(line -> line.startsWith("model name") && line.contains(":"))
                    .map(line -> line.substring(line.indexOf(':') + 1).trim())
                    .findFirst().orElse("");
        } catch (IOException | RuntimeException e) {
            return "";
        }
    }

    static String toJson(Options options, Map<String, List<Point>> results, Map<String, String> errors) {
        StringBuilder json = new StringBuilder();
        json.append("{\"bench\":").append(quote("fabric " + options.mode)).append(",\"layer\":\"jvm\"");
        json.append(",\"units\":{\"lat\":\"us, round trip\",\"bw\":").append(quote(BW_UNIT)).append('}');
        json.append(",\"machine\":{\"cpus\":").append(Runtime.getRuntime().availableProcessors());
        for (Map.Entry<String, String> e : env().entrySet()) {
            json.append(',').append(quote(e.getKey())).append(':').append(quote(e.getValue()));
        }
        json.append("},\"variants\":[");
        boolean first = true;
        first = true;
        for (Map.Entry<String, List<Point>> variant : results.entrySet()) {
            json.append(first ? "" : ",").append("\n {\"name\":").append(quote(variant.getKey()));
            first = false;
            String error = errors.get(variant.getKey());
            if (error != null) {
                json.append(",\"error\":").append(quote(error));
            }
            json.append(",\"points\":[");
            boolean firstPoint = true;
            for (Point p : variant.getValue()) {
                json.append(firstPoint ? "" : ",").append("\n  {\"size_bytes\":").append(p.sizeBytes())
                        .append(",\"iterations\":").append(p.iterations())
                        .append(",\"lat_us_min\":").append(number(p.latUsMin()))
                        .append(",\"lat_us_p50\":").append(number(p.latUsP50()))
                        .append(",\"lat_us_p99\":").append(number(p.latUsP99()))
                        .append(",\"bw_mb_s\":").append(number(p.bwMbS()))
                        .append(",\"msg_rate\":").append(number(p.msgRate()));
                if (p.window() != null) {
                    json.append(",\"window\":").append(p.window());
                }
                json.append('}');
                firstPoint = false;
            }
            json.append("]}");
        }
        json.append("\n]}\n");
        return json.toString();
    }

    private static String number(Double value) {
        if (value == null || value.isNaN() || value.isInfinite()) {
            return "null";
        }
        return String.format(Locale.ROOT, "%.3f", value);
    }

    static String quote(String text) {
        StringBuilder quoted = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> quoted.append("\\\"");
                case '\\' -> quoted.append("\\\\");
                case '\n' -> quoted.append("\\n");
                case '\r' -> quoted.append("\\r");
                case '\t' -> quoted.append("\\t");
                default -> {
                    if (c < 0x20) {
                        quoted.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        quoted.append(c);
                    }
                }
            }
        }
        return quoted.append('"').toString();
    }
}
