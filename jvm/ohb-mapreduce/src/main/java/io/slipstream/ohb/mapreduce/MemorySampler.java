package io.slipstream.ohb.mapreduce;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

/**
 * Peak memory during one job, read from /proc: this JVM's (the mini cluster's NodeManagers, with
 * their shuffle handlers and fabric node, and the ResourceManager; its peak is reset before the
 * job through /proc/self/clear_refs) and the largest reduce task's (a YarnChild JVM whose
 * arguments name a reduce attempt; the kernel's VmHWM of each, kept across samples).
 * A background thread samples every {@link #INTERVAL_MS} ms.
 */
final class MemorySampler implements AutoCloseable {
    static final long INTERVAL_MS = 100;
    /** Reduce processes followed at once; more would be a bug (a job has a few reducers). */
    private static final int PROCESSES_MAX = 256;

    /** A reduce attempt's id, as YarnChild's arguments carry it. */
    private static final java.util.regex.Pattern REDUCE_ATTEMPT = java.util.regex.Pattern.compile("attempt_\\d+_\\d+_r_");

    private final Map<Long, Long> reducerPeakKib = new HashMap<>();
    private final Thread thread;
    private volatile boolean running = true;
    private final boolean selfReset;

    /**
     * Starts sampling. Every reduce task running meanwhile counts: the bench runs one job at a time
     * (its ids are not known before Hadoop's tools submit them).
     */
    MemorySampler() {
        this.selfReset = resetOwnPeak();
        this.thread = new Thread(this::loop, "ohb-memory-sampler");
        thread.setDaemon(true);
        thread.start();
    }

    /** Writing 5 to clear_refs resets VmHWM to the current RSS (Linux 4.0 and later). */
    private static boolean resetOwnPeak() {
        try {
            Files.writeString(Path.of("/proc/self/clear_refs"), "5");
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    private void loop() {
        while (running) {
            sample();
            try {
                Thread.sleep(INTERVAL_MS);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    private synchronized void sample() {
        try (DirectoryStream<Path> procs = Files.newDirectoryStream(Path.of("/proc"), p -> p.getFileName().toString().chars().allMatch(Character::isDigit))) {
            for (Path proc : procs) {
                byte[] cmdline;
                try {
                    cmdline = Files.readAllBytes(proc.resolve("cmdline"));
                } catch (IOException e) {
                    continue; // gone
                }
                String args = new String(cmdline, StandardCharsets.ISO_8859_1);
                if (!args.contains("YarnChild") || !REDUCE_ATTEMPT.matcher(args).find()) {
                    continue;
                }
                long pid = Long.parseLong(proc.getFileName().toString());
                long kib = peakKib(proc.resolve("status"));
                if (kib > 0 && (reducerPeakKib.containsKey(pid) || reducerPeakKib.size() < PROCESSES_MAX)) {
                    reducerPeakKib.merge(pid, kib, Math::max);
                }
            }
        } catch (IOException e) {
            // /proc unreadable: no figures (reported as -1)
        }
    }

    /** VmHWM of a status file, KiB; 0 when unreadable. */
    static long peakKib(Path status) {
        try {
            for (String line : Files.readAllLines(status, StandardCharsets.ISO_8859_1)) {
                if (line.startsWith("VmHWM:")) {
                    return Long.parseLong(line.substring(6).trim().split("\\s+")[0]);
                }
            }
        } catch (IOException | RuntimeException e) {
            return 0;
        }
        return 0;
    }

    @Override
    public void close() throws InterruptedException {
        running = false;
        thread.interrupt();
        thread.join(5_000);
    }

    /** The largest reduce task's peak, MiB; -1 when none was seen. */
    synchronized double reducerPeakMib() {
        return reducerPeakKib.values().stream().mapToLong(Long::longValue).max().orElse(-1) / 1024.0;
    }

    /** Reduce processes seen. */
    synchronized int reducersSeen() {
        return reducerPeakKib.size();
    }

    /** This JVM's peak since the job started (since it started if the reset was refused), MiB. */
    double clusterPeakMib() {
        long kib = peakKib(Path.of("/proc/self/status"));
        return kib > 0 ? kib / 1024.0 : -1;
    }

    /** Whether {@link #clusterPeakMib} is the job's peak (the reset worked) or the process's. */
    boolean clusterPeakIsThisJobs() {
        return selfReset;
    }
}
