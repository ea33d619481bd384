package io.slipstream.mapreduce;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricNode;
import io.slipstream.shuffle.BlockFetchException;
import io.slipstream.shuffle.BlockFetcher;
import io.slipstream.shuffle.FetchedBlock;
import io.slipstream.shuffle.MapOutputBlock;
import io.slipstream.shuffle.RequestAuthenticator;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.mapred.IndexRecord;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.ShuffleHandler;
import org.apache.hadoop.mapred.SpillRecord;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.security.token.JobTokenIdentifier;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.server.api.ApplicationInitializationContext;
import org.apache.hadoop.yarn.server.api.ApplicationTerminationContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The NodeManager side as the NodeManager runs it (a real ShuffleHandler lifecycle, jobs announced
 * with their tokens, map outputs in the NodeManager's layout), fetched over a real fabric: each job
 * under its own secret, nothing of one job reachable with another's.
 */
class SlipstreamShuffleHandlerTest {
    private static final long CLUSTER_TIMESTAMP = 1_700_000_000_000L;
    private static final int PARTITIONS = 3;

    @TempDir
    Path localDir;

    private final List<AutoCloseable> closeLater = new ArrayList<>();
    private SlipstreamShuffleHandler handler;
    private int shufflePort;
    private int fabricPort;
    private final Map<MapOutputBlock, byte[]> written = new HashMap<>();

    @BeforeEach
    void startHandler() throws Exception {
        try (ServerSocket socket = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            fabricPort = socket.getLocalPort();
        }
        Configuration conf = new Configuration();
        conf.setInt(ShuffleHandler.SHUFFLE_PORT_CONFIG_KEY, 0);
        conf.setInt(MapReduceConf.PORT.key(), fabricPort);
        conf.set(MapReduceConf.BUFFER_CAP.key(), "32m");
        conf.set(MapReduceConf.MAX_BYTES_IN_FLIGHT.key(), "4m");
        handler = new SlipstreamShuffleHandler();
        handler.setAuxiliaryLocalPathHandler(new LocalDirs(localDir));
        handler.init(conf);
        handler.start();
        shufflePort = ShuffleHandler.deserializeMetaData(handler.getMetaData());
    }

    @AfterEach
    void stop() throws Exception {
        for (int i = closeLater.size() - 1; i >= 0; i--) {
            closeLater.get(i).close();
        }
        handler.stop();
    }

    private static JobID job(int id) {
        return new JobID(Long.toString(CLUSTER_TIMESTAMP), id);
    }

    /** Announces a job to the NodeManager as YARN does (user, application, the job's token); returns its secret. */
    private String startJob(JobID job, String user, byte[] password) throws IOException {
        Token<JobTokenIdentifier> token = new Token<>(new JobTokenIdentifier(new Text(job.toString())).getBytes(), password,
                JobTokenIdentifier.KIND_NAME, new Text("shuffle"));
        handler.initializeApplication(new ApplicationInitializationContext(user, ApplicationId.newInstance(CLUSTER_TIMESTAMP, job.getId()),
                ShuffleHandler.serializeServiceData(token)));
        return Base64.getEncoder().encodeToString(password);
    }

    /** A map output where a map task leaves it: file.out with PARTITIONS partitions and its index (with CRC). */
    private TaskAttemptID writeMapOutput(JobID job, String user, int task, long seed) throws IOException {
        TaskAttemptID map = new TaskAttemptID(job.getJtIdentifier(), job.getId(), TaskType.MAP, task, 0);
        Path dir = localDir.resolve("usercache/" + user + "/appcache/" + ApplicationId.newInstance(CLUSTER_TIMESTAMP, job.getId())
                + "/output/" + map);
        Files.createDirectories(dir);
        Random random = new Random(seed);
        SpillRecord index = new SpillRecord(PARTITIONS);
        ByteBuffer all = ByteBuffer.allocate(1 << 20);
        for (int p = 0; p < PARTITIONS; p++) {
            byte[] bytes = new byte[p == 1 ? 0 : 1000 + random.nextInt(200_000)];
            random.nextBytes(bytes);
            index.putIndex(new IndexRecord(all.position(), bytes.length + 7L, bytes.length), p);
            all.put(bytes);
            written.put(MapBlocks.block(MapBlocks.DATA, map, p), bytes);
        }
        Files.write(dir.resolve("file.out"), java.util.Arrays.copyOf(all.array(), all.position()));
        index.writeToFile(new org.apache.hadoop.fs.Path(dir.resolve("file.out.index").toString()), new JobConf());
        return map;
    }

    private Map<MapOutputBlock, byte[]> fetch(String scope, String secret, List<MapOutputBlock> blocks) throws Exception {
        FabricNode client = FabricNode.builder().poolCapBytes(32L << 20).maxMessageBytes(2 << 20).requestTimeout(Duration.ofSeconds(10))
                .start();
        closeLater.add(client);
        List<BlockFetcher.Wanted> wanted = new ArrayList<>();
        for (MapOutputBlock block : blocks) {
            wanted.add(new BlockFetcher.Wanted(block, 1000, block));
        }
        Map<MapOutputBlock, byte[]> got = new HashMap<>();
        try (BlockFetcher fetcher = new BlockFetcher(client, RequestAuthenticator.scoped(scope, secret),
                new BlockFetcher.Limits(4 << 20, 4, 1 << 20, 64, Duration.ofSeconds(20)),
                Map.of(new InetSocketAddress("127.0.0.1", fabricPort), wanted))) {
            fetcher.start();
            while (fetcher.hasNext()) {
                FetchedBlock block = fetcher.next();
                got.put(block.block(), block.stream().readAllBytes());
                block.release();
            }
        }
        return got;
    }

    private static List<MapOutputBlock> allBlocks(TaskAttemptID map) {
        List<MapOutputBlock> blocks = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            blocks.add(MapBlocks.block(MapBlocks.INDEX, map, p));
            blocks.add(MapBlocks.block(MapBlocks.DATA, map, p));
        }
        return blocks;
    }

    @Test
    void a_job_fetches_its_own_map_outputs_and_index_records_under_its_secret() throws Exception {
        String secret = startJob(job(1), "alice", "password-one".getBytes());
        TaskAttemptID map = writeMapOutput(job(1), "alice", 0, 1);
        Map<MapOutputBlock, byte[]> got = fetch(MapBlocks.scope(shufflePort, job(1)), secret, allBlocks(map));
        for (int p = 0; p < PARTITIONS; p++) {
            byte[] expected = written.get(MapBlocks.block(MapBlocks.DATA, map, p));
            assertArrayEquals(expected, got.get(MapBlocks.block(MapBlocks.DATA, map, p)), "partition " + p);
            ByteBuffer record = ByteBuffer.wrap(got.get(MapBlocks.block(MapBlocks.INDEX, map, p)));
            record.getLong();
            assertEquals(expected.length + 7L, record.getLong(), "raw length of partition " + p);
            assertEquals(expected.length, record.getLong(), "part length of partition " + p);
        }
    }

    @Test
    void another_jobs_secret_scope_or_nodemanager_is_refused() throws Exception {
        String secretOne = startJob(job(1), "alice", "password-one".getBytes());
        String secretTwo = startJob(job(2), "bob", "password-two".getBytes());
        TaskAttemptID mapOne = writeMapOutput(job(1), "alice", 0, 1);
        List<MapOutputBlock> blocks = allBlocks(mapOne);
        byte[] jobOneBytes = written.get(blocks.get(1));
        writeMapOutput(job(2), "bob", 0, 2);
        byte[] jobTwoBytes = written.get(blocks.get(1));
        String scopeOne = MapBlocks.scope(shufflePort, job(1));
        BlockFetchException wrongSecret = assertThrows(BlockFetchException.class, () -> fetch(scopeOne, secretTwo, blocks));
        assertTrue(wrongSecret.getMessage().contains("authentication failed"), wrongSecret.getMessage());
        // Job two's reducer naming its own scope gets only its own job's outputs: the map ids of job one are its own.
        Map<MapOutputBlock, byte[]> own = fetch(MapBlocks.scope(shufflePort, job(2)), secretTwo, blocks);
        assertArrayEquals(jobTwoBytes, own.get(blocks.get(1)));
        assertTrue(!java.util.Arrays.equals(jobOneBytes, own.get(blocks.get(1))), "job two read job one's bytes");
        assertThrows(BlockFetchException.class, () -> fetch(MapBlocks.scope(shufflePort, job(3)), secretOne, blocks), "unknown job");
        assertThrows(BlockFetchException.class, () -> fetch(MapBlocks.scope(shufflePort + 1, job(1)), secretOne, blocks), "other NodeManager");
        assertThrows(BlockFetchException.class, () -> fetch("garbage", secretOne, blocks), "malformed scope");
        assertEquals(PARTITIONS * 2, fetch(scopeOne, secretOne, blocks).size());
        handler.stopApplication(new ApplicationTerminationContext(ApplicationId.newInstance(CLUSTER_TIMESTAMP, 1)));
        BlockFetchException finished = assertThrows(BlockFetchException.class, () -> fetch(scopeOne, secretOne, blocks));
        assertTrue(finished.getMessage().contains("unknown job"), finished.getMessage());
    }

    @Test
    void a_lost_or_unknown_map_output_fails_its_request_and_the_server_goes_on() throws Exception {
        String secret = startJob(job(1), "alice", "password-one".getBytes());
        TaskAttemptID kept = writeMapOutput(job(1), "alice", 0, 1);
        TaskAttemptID lost = writeMapOutput(job(1), "alice", 1, 2);
        Files.delete(localDir.resolve("usercache/alice/appcache/" + ApplicationId.newInstance(CLUSTER_TIMESTAMP, 1) + "/output/" + lost
                + "/file.out"));
        String scope = MapBlocks.scope(shufflePort, job(1));
        BlockFetchException lostOutput = assertThrows(BlockFetchException.class,
                () -> fetch(scope, secret, List.of(MapBlocks.block(MapBlocks.DATA, lost, 0))));
        assertTrue(lostOutput.getMessage().contains(lost.toString()), "the failure names the lost map: " + lostOutput.getMessage());
        TaskAttemptID neverRan = new TaskAttemptID(job(1).getJtIdentifier(), 1, TaskType.MAP, 7, 0);
        assertThrows(BlockFetchException.class, () -> fetch(scope, secret, List.of(MapBlocks.block(MapBlocks.DATA, neverRan, 0))));
        assertThrows(BlockFetchException.class, () -> fetch(scope, secret, List.of(MapBlocks.block(MapBlocks.DATA, kept, PARTITIONS))),
                "partition beyond the map's");
        assertEquals(PARTITIONS * 2, fetch(scope, secret, allBlocks(kept)).size());
    }
}
