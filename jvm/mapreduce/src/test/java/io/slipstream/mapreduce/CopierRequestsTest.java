package io.slipstream.mapreduce;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.shuffle.BlockFetcher;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskType;
import org.junit.jupiter.api.Test;

/** What a reducer's copiers ask NodeManagers for, and how much of it at once. */
class CopierRequestsTest {
    @Test
    void each_copier_keeps_several_requests_in_flight_within_its_share() {
        MapReduceConf conf = new MapReduceConf(new Configuration(false));
        for (int copiers : new int[] {1, 5, 20, 100}) {
            BlockFetcher.Limits limits = SlipstreamShuffle.copierLimits(conf, copiers);
            assertEquals(Math.max(conf.maxBytesInFlight / copiers, 1 << 20), limits.maxBytesInFlight(), copiers + " copiers");
            // The fix measured in docs/mapreduce-shuffle.md: with 5 copiers a request used to be 8 MiB
            // of a 9.6 MiB share, one in flight at a time.
            assertTrue(4L * limits.requestBytesMax() <= limits.maxBytesInFlight(), copiers + " copiers: " + limits);
            // Never above what the NodeManager's fabric accepts (its messages are sized from the same setting).
            assertTrue(limits.requestBytesMax() <= conf.requestBytesMax, copiers + " copiers: " + limits);
        }
        assertEquals((1 << 20) - BlockFetcher.Limits.RESPONSE_HEADROOM_BYTES, SlipstreamShuffle.copierLimits(conf, 5).requestBytesMax());
    }

    @Test
    void index_records_are_asked_first_then_the_bytes_in_the_schedulers_order() {
        List<TaskAttemptID> maps = List.of(new TaskAttemptID("1", 2, TaskType.MAP, 7, 0), new TaskAttemptID("1", 2, TaskType.MAP, 3, 1));
        List<BlockFetcher.Wanted> wanted = FabricCopier.wanted(maps, 5);
        assertEquals(4, wanted.size());
        for (int i = 0; i < 2; i++) {
            assertEquals(MapBlocks.INDEX, wanted.get(i).block().shuffleId());
            assertEquals(MapBlocks.DATA, wanted.get(2 + i).block().shuffleId());
            assertEquals(maps.get(i), wanted.get(i).tag());
            assertEquals(maps.get(i), wanted.get(2 + i).tag());
            assertEquals(MapBlocks.mapId(maps.get(i)), wanted.get(2 + i).block().mapId());
            assertEquals(5, wanted.get(i).block().partition());
        }
    }
}
