package io.slipstream.spark;

import java.io.IOException;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.ShuffleWriter;
import scala.Option;
import scala.Product2;
import scala.collection.Iterator;

/** Spark's own writer; once it has committed the map output, the output is read into the prefetch cache. */
final class PrefetchingShuffleWriter<K, V> extends ShuffleWriter<K, V> {
    private final ShuffleWriter<K, V> writer;
    private final FabricShuffleRuntime runtime;
    private final int shuffleId;
    private final long mapId;

    PrefetchingShuffleWriter(ShuffleWriter<K, V> writer, FabricShuffleRuntime runtime, int shuffleId, long mapId) {
        this.writer = writer;
        this.runtime = runtime;
        this.shuffleId = shuffleId;
        this.mapId = mapId;
    }

    @Override
    public void write(Iterator<Product2<K, V>> records) throws IOException {
        writer.write(records);
    }

    @Override
    public Option<MapStatus> stop(boolean success) {
        Option<MapStatus> status = writer.stop(success);
        if (success && status.isDefined()) {
            runtime.prefetch(shuffleId, mapId);
        }
        return status;
    }

    @Override
    public long[] getPartitionLengths() {
        return writer.getPartitionLengths();
    }
}
