package io.slipstream.fabric;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/** Shared by the tests: nodes, handlers, payload patterns, child JVMs. */
final class Fixtures {
    /** Echo: the payload comes back, without copies. */
    static final int OP_ECHO = 1;
    /** Fails with the payload as message. */
    static final int OP_FAIL = 2;
    /** The handler throws. */
    static final int OP_THROW = 3;
    /** Responds with the request's op and length as two big-endian ints, copied from a heap array. */
    static final int OP_DESCRIBE = 4;
    /** Echo after 2 ms: an answer well past any waiting thread's spin. */
    static final int OP_SLOW_ECHO = 5;

    private Fixtures() {
    }

    static FabricConfig.Builder serverConfig() {
        return FabricConfig.builder()
                .listen("127.0.0.1", 0)
                .poolCapBytes(64L << 20)
                .maxMessageBytes(16 << 20)
                .requestTimeout(Duration.ofSeconds(20));
    }

    static FabricConfig.Builder clientConfig() {
        return FabricConfig.builder()
                .poolCapBytes(64L << 20)
                .maxMessageBytes(16 << 20)
                .requestTimeout(Duration.ofSeconds(20));
    }

    static final FabricHandler HANDLER = request -> {
        switch (request.op()) {
            case OP_ECHO -> request.respond(request.payload());
            case OP_FAIL -> request.fail(StandardCharsets.UTF_8.decode(request.payloadBuffer()).toString());
            case OP_THROW -> throw new IllegalStateException("handler refuses");
            case OP_DESCRIBE -> {
                byte[] answer = ByteBuffer.allocate(8).putInt(request.op()).putInt(request.payload().length()).array();
                request.respond(answer);
            }
            case OP_SLOW_ECHO -> {
                try {
                    Thread.sleep(2);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                request.respond(request.payload());
            }
            default -> request.fail("unknown op " + request.op());
        }
    };

    static FabricNode startServer(int threads) throws FabricUnavailableException {
        FabricNode server = serverConfig().start();
        server.serve(HANDLER, threads);
        return server;
    }

    /** Deterministic bytes: byte i of a payload seeded with {@code seed}. */
    static byte patternByte(long seed, int i) {
        long x = seed * 0x9E3779B97F4A7C15L + i * 0xBF58476D1CE4E5B9L;
        x ^= x >>> 29;
        return (byte) x;
    }

    static byte[] pattern(long seed, int length) {
        byte[] bytes = new byte[length];
        for (int i = 0; i < length; i++) {
            bytes[i] = patternByte(seed, i);
        }
        return bytes;
    }

    /** The first index where {@code actual} differs from the pattern, or -1. */
    static int mismatch(long seed, int length, ByteBuffer actual) {
        if (actual.remaining() != length) {
            return Math.min(length, actual.remaining());
        }
        int base = actual.position();
        for (int i = 0; i < length; i++) {
            if (actual.get(base + i) != patternByte(seed, i)) {
                return i;
            }
        }
        return -1;
    }

    /** Waits until {@code condition} holds, polling, up to {@code timeout}; runs {@code nudge} between polls. */
    static boolean eventually(Duration timeout, Runnable nudge, java.util.function.BooleanSupplier condition)
            throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            if (condition.getAsBoolean()) {
                return true;
            }
            nudge.run();
            Thread.sleep(20);
        }
        return condition.getAsBoolean();
    }

    /** A child JVM on this test class path, running {@code main}. stderr is merged into stdout. */
    static Process startJvm(Class<?> main, List<String> jvmArgs, Map<String, String> env, String... args)
            throws IOException {
        List<String> command = new ArrayList<>();
        command.add(System.getProperty("java.home") + File.separator + "bin" + File.separator + "java");
        command.add("-Xmx128m");
        // A crashing child leaves its report in the temporary directory, not in the source tree.
        command.add("-XX:ErrorFile=" + System.getProperty("java.io.tmpdir") + File.separator + "slipstream-hs_err_%p.log");
        command.addAll(jvmArgs);
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(main.getName());
        command.addAll(List.of(args));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().putAll(env);
        return builder.start();
    }

    /** Runs a child JVM to completion (bounded) and returns its exit code and output. */
    static ChildResult runJvm(Class<?> main, List<String> jvmArgs, Map<String, String> env, String... args)
            throws IOException, InterruptedException {
        Process process = startJvm(main, jvmArgs, env, args);
        process.getOutputStream().close();
        StringBuilder output = new StringBuilder();
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    synchronized (output) {
                        output.append(line).append('\n');
                    }
                }
            } catch (IOException ignored) {
                // the process ended
            }
        });
        reader.start();
        if (!process.waitFor(60, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            process.waitFor(10, TimeUnit.SECONDS);
        }
        reader.join(5_000);
        synchronized (output) {
            return new ChildResult(process.exitValue(), output.toString());
        }
    }

    record ChildResult(int exitCode, String output) {
    }
}
