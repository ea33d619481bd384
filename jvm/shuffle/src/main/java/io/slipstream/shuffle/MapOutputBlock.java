package io.slipstream.shuffle;

/**
 * One partition of one map task's output: the unit reducers fetch. {@code mapId} is the engine's
 * identifier of the map output (Spark: the map task attempt's id), {@code partition} the reducer's.
 */
public record MapOutputBlock(int shuffleId, long mapId, int partition) {
    public MapOutputBlock {
        if (shuffleId < 0 || partition < 0) {
            throw new IllegalArgumentException("negative shuffle or partition: " + shuffleId + "/" + partition);
        }
    }

    @Override
    public String toString() {
        return "shuffle_" + shuffleId + "_" + mapId + "_" + partition;
    }
}
