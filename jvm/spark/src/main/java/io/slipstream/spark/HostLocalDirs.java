package io.slipstream.spark;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkEnv;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.HostLocalDirManager;
import scala.Option;
import scala.runtime.BoxedUnit;

/**
 * Host-local blocks as Spark's own reader reads them ({@code spark.shuffle.readHostLocalDisk},
 * on by default): a block written by another executor of this host is read from that executor's
 * files, whose local directories Spark's {@code HostLocalDirManager} asks of that executor (or of
 * the external shuffle service) once and caches. Spark enables the manager only when the setting
 * is on (and the old fetch protocol off), so its presence is the switch.
 */
final class HostLocalDirs {
    /** The longest wait for another executor's directories (then its blocks go over the fabric). */
    static final Duration DIRS_WAIT = Duration.ofSeconds(30);

    private HostLocalDirs() {}

    /** Whether Spark reads host-local blocks from disk in this executor. */
    static boolean enabled(SparkEnv env) {
        return env.blockManager().hostLocalDirManager().isDefined();
    }

    /**
     * The local directories of {@code executor} (of this host), asked for at most once per
     * executor and process (Spark's manager caches them); a failure is an exception saying why.
     */
    static String[] of(SparkEnv env, BlockManagerId executor) throws Exception {
        BlockManager blockManager = env.blockManager();
        HostLocalDirManager manager = blockManager.hostLocalDirManager().get();
        Option<String[]> cached = manager.getCachedHostLocalDirsFor(executor.executorId());
        if (cached.isDefined()) {
            return cached.get();
        }
        // As Spark: the external shuffle service knows every executor's directories; otherwise ask the executor.
        String host = blockManager.externalShuffleServiceEnabled() ? blockManager.blockManagerId().host() : executor.host();
        int port = blockManager.externalShuffleServiceEnabled() ? blockManager.externalShuffleServicePort() : executor.port();
        CompletableFuture<String[]> dirs = new CompletableFuture<>();
        manager.getHostLocalDirs(host, port, new String[] {executor.executorId()}, result -> {
            if (result.isFailure()) {
                dirs.completeExceptionally(result.failed().get());
            } else {
                Option<String[]> found = result.get().get(executor.executorId());
                if (found.isDefined()) {
                    dirs.complete(found.get());
                } else {
                    dirs.completeExceptionally(new IllegalStateException("no directories known for executor " + executor.executorId()));
                }
            }
            return BoxedUnit.UNIT;
        });
        return dirs.get(DIRS_WAIT.toMillis(), TimeUnit.MILLISECONDS);
    }
}
