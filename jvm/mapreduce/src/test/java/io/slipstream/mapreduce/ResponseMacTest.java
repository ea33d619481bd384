package io.slipstream.mapreduce;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricNode;
import io.slipstream.shuffle.BlockFetchException;
import io.slipstream.shuffle.BlockFetcher;
import io.slipstream.shuffle.FetchedBlock;
import io.slipstream.shuffle.MapOutputBlock;
import io.slipstream.shuffle.RequestAuthenticator;
import io.slipstream.shuffle.RequestAuthenticator.ResponseMac;
import io.slipstream.shuffle.ShuffleProtocol;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.lang.reflect.Method;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.UnaryOperator;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumException;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalDirAllocator;
import org.apache.hadoop.io.DataInputBuffer;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.io.compress.CompressionCodec;
import org.apache.hadoop.io.compress.DefaultCodec;
import org.apache.hadoop.mapred.Counters;
import org.apache.hadoop.mapred.IFile;
import org.apache.hadoop.mapred.IFileInputStream;
import org.apache.hadoop.mapred.IndexRecord;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.MROutputFiles;
import org.apache.hadoop.mapred.RawKeyValueIterator;
import org.apache.hadoop.mapred.ShuffleHandler;
import org.apache.hadoop.mapred.SpillRecord;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.MRConfig;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.security.token.JobTokenIdentifier;
import org.apache.hadoop.mapreduce.security.token.JobTokenSecretManager;
import org.apache.hadoop.mapreduce.task.reduce.MergeManagerImpl;
import org.apache.hadoop.mapreduce.task.reduce.ShuffleClientMetrics;
import org.apache.hadoop.mapreduce.task.reduce.ShuffleSchedulerImpl;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.util.Progress;
import org.apache.hadoop.util.ReflectionUtils;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.server.api.ApplicationInitializationContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What a fabric response's HMAC covers ({@code slipstream.mapreduce.responseMac}), with a real
 * NodeManager handler serving real IFile map outputs (each partition with its CRC32, as a map task
 * writes them) and, between it and the reducer, a fabric node that forwards every request and
 * answer and alters them as a forger or a bad link on the path would. By default (header) the MAC
 * covers what says what the bytes are (the response's header, the index records) but not the data,
 * whose altered byte is then caught by Hadoop's own IFile check, as a failed fetch; with full it is
 * caught by the MAC. Requests stay authenticated in both modes, and the mode cannot be changed on
 * the way or disagree between the two sides without a clear failure.
 */
class ResponseMacTest {
    private static final long CLUSTER_TIMESTAMP = 1_700_000_000_000L;
    private static final JobID JOB = new JobID(Long.toString(CLUSTER_TIMESTAMP), 1);
    private static final String USER = "alice";
    private static final byte[] PASSWORD = "the job's token password".getBytes(StandardCharsets.UTF_8);
    private static final int PARTITIONS = 2;
    private static final int RECORDS = 2000;
    private static final long WAIT_MS = 30_000;
    /** A request's flags: tagged (1), scoped (2), header-only response MAC (4). */
    private static final byte HEADER_MAC_REQUEST_FLAGS = 7;

    @TempDir
    Path localDir;

    private final List<AutoCloseable> closeLater = new ArrayList<>();
    private SlipstreamShuffleHandler handler;
    private int shufflePort;
    private int nodeManagerPort;

    @AfterEach
    void stop() throws Exception {
        for (int i = closeLater.size() - 1; i >= 0; i--) {
            closeLater.get(i).close();
        }
        if (handler != null) {
            handler.stop();
        }
    }

    @Test
    void by_default_a_data_byte_altered_on_the_way_passes_the_mac_and_fails_hadoops_ifile_crc() throws Exception {
        startNodeManager("header");
        TaskAttemptID map = writeMapOutput(null);
        Proxy proxy = proxy();
        proxy.responses = flipOnce(ResponseMacTest::flipDataByte);
        MapOutputBlock data = MapBlocks.block(MapBlocks.DATA, map, 0);
        byte[] written = fileBytes(map, 0);
        byte[] received = fetch(proxy.port, ResponseMac.HEADER, List.of(data)).get(data);
        assertEquals(written.length, received.length);
        assertFalse(java.util.Arrays.equals(written, received), "the proxy altered a byte and the header-only MAC let it through");
        ifileCheck(written);
        assertThrows(ChecksumException.class, () -> ifileCheck(received), "Hadoop's IFile check catches the altered byte");
    }

    @Test
    void with_full_a_data_byte_altered_on_the_way_fails_the_mac() throws Exception {
        startNodeManager("header");
        TaskAttemptID map = writeMapOutput(null);
        Proxy proxy = proxy();
        MapOutputBlock data = MapBlocks.block(MapBlocks.DATA, map, 0);
        assertArrayEquals(fileBytes(map, 0), fetch(proxy.port, ResponseMac.FULL, List.of(data)).get(data),
                "a job asking for full MACs is answered in that mode by a NodeManager allowing header-only ones");
        proxy.responses = flipOnce(ResponseMacTest::flipDataByte);
        BlockFetchException altered = assertThrows(BlockFetchException.class, () -> fetch(proxy.port, ResponseMac.FULL, List.of(data)));
        assertTrue(altered.getMessage().contains("response authentication failed"), altered.getMessage());
    }

    @Test
    void in_either_mode_an_altered_response_header_or_index_record_fails_the_mac() throws Exception {
        startNodeManager("header");
        TaskAttemptID map = writeMapOutput(null);
        Proxy proxy = proxy();
        List<MapOutputBlock> blocks = List.of(MapBlocks.block(MapBlocks.INDEX, map, 0), MapBlocks.block(MapBlocks.DATA, map, 0));
        Map<String, UnaryOperator<byte[]>> alterations = Map.of(
                "a block's length", ResponseMacTest::growDataBlockLength,
                "an index record's raw length", ResponseMacTest::flipIndexRecordByte);
        for (ResponseMac mode : ResponseMac.values()) {
            for (Map.Entry<String, UnaryOperator<byte[]>> alteration : alterations.entrySet()) {
                proxy.responses = flipOnce(alteration.getValue());
                BlockFetchException failure = assertThrows(BlockFetchException.class, () -> fetch(proxy.port, mode, blocks),
                        mode + ": " + alteration.getKey());
                assertTrue(failure.getMessage().contains("response authentication failed"), mode + ", " + alteration.getKey() + ": "
                        + failure.getMessage());
            }
        }
        proxy.responses = UnaryOperator.identity();
        assertEquals(2, fetch(proxy.port, ResponseMac.HEADER, blocks).size(), "unaltered, the same request passes");
    }

    @Test
    void a_nodemanager_requiring_full_macs_refuses_reducers_asking_for_header_only_ones_with_the_reason() throws Exception {
        startNodeManager("full");
        TaskAttemptID map = writeMapOutput(null);
        MapOutputBlock data = MapBlocks.block(MapBlocks.DATA, map, 0);
        BlockFetchException refused = assertThrows(BlockFetchException.class,
                () -> fetch(nodeManagerPort, ResponseMac.HEADER, List.of(data)));
        assertTrue(refused.getMessage().contains("MACs every byte"), refused.getMessage());
        assertArrayEquals(fileBytes(map, 0), fetch(nodeManagerPort, ResponseMac.FULL, List.of(data)).get(data));
    }

    /** The mode is in the request's flags, which its tag covers when they ask for header-only MACs. */
    @Test
    void the_mode_cannot_be_changed_on_the_way() throws Exception {
        startNodeManager("header");
        TaskAttemptID map = writeMapOutput(null);
        Proxy proxy = proxy();
        MapOutputBlock data = MapBlocks.block(MapBlocks.DATA, map, 0);
        // Flags are the payload's second byte; 4 asks for a header-only response MAC.
        proxy.requests = payload -> {
            payload[1] &= ~4;
            return payload;
        };
        BlockFetchException downgraded = assertThrows(BlockFetchException.class, () -> fetch(proxy.port, ResponseMac.HEADER, List.of(data)));
        assertTrue(downgraded.getMessage().contains("authentication failed"), downgraded.getMessage());
        proxy.requests = payload -> {
            payload[1] |= 4;
            return payload;
        };
        BlockFetchException upgraded = assertThrows(BlockFetchException.class, () -> fetch(proxy.port, ResponseMac.FULL, List.of(data)));
        assertTrue(upgraded.getMessage().contains("authentication failed"), upgraded.getMessage());
    }

    /** The default mode through the reducer's copier and Hadoop's own scheduler, merge manager and MapOutput. */
    @ParameterizedTest(name = "codec {0}")
    @ValueSource(strings = {"none", "deflate"})
    void a_copier_in_the_default_mode_merges_what_the_map_wrote(String codecName) throws Throwable {
        startNodeManager("header");
        CompressionCodec codec = codec(codecName);
        TaskAttemptID map = writeMapOutput(codec);
        Proxy proxy = proxy();
        Reducer reducer = new Reducer(proxy, codec, map);
        assertTrue(reducer.scheduler.waitUntilDone((int) WAIT_MS), "copied within " + WAIT_MS + " ms: " + reducer.counters);
        // The copier counts the fabric's share just after it tells the scheduler.
        reducer.await(() -> reducer.counters.findCounter(SlipstreamCounter.FABRIC_SHUFFLED_MAPS).getValue() == 1, "the map counted as fabric's");
        RawKeyValueIterator merged = reducer.merge();
        int records = 0;
        Text key = new Text();
        Text value = new Text();
        while (merged.next()) {
            read(key, merged.getKey());
            read(value, merged.getValue());
            assertEquals(key(records), key.toString());
            assertEquals(value(0, records), value.toString());
            records++;
        }
        assertEquals(RECORDS, records);
        assertNull(reducer.reported.get());
        assertEquals(java.util.Set.of(HEADER_MAC_REQUEST_FLAGS), proxy.flagsSeen, "by default a reducer asks for header-only MACs");
    }

    /**
     * Data altered on the way, through the copier and Hadoop's own MapOutput: the header-only MAC
     * lets it through (above), Hadoop's IFile check (or the codec, compressed) fails it, and the
     * copier reports a failed fetch of that map as Hadoop's fetcher does, never a failed reduce task.
     * Byte 20 of a bzip2 stream is in its block's Huffman tables: Hadoop's bzip2 decoder throws
     * ArrayIndexOutOfBoundsException there (as for about one byte in eight of this output), an
     * unchecked exception Hadoop's fetcher turns into a read error, and so must the copier.
     */
    @ParameterizedTest(name = "codec {0}, byte {1}")
    @CsvSource({"none, -1", "deflate, -1", "bzip2, 20"})
    void a_copier_in_the_default_mode_reports_data_altered_on_the_way_as_a_failed_fetch(String codecName, int at) throws Exception {
        startNodeManager("header");
        CompressionCodec codec = codec(codecName);
        TaskAttemptID map = writeMapOutput(codec);
        Proxy proxy = proxy();
        proxy.responses = flipOnce(response -> flipDataByte(response, at));
        Reducer reducer = new Reducer(proxy, codec, map);
        reducer.awaitFetchFailure(map);
        assertEquals(1, reducer.counters.findCounter("Shuffle Errors", "IO_ERROR").getValue());
        assertEquals(0, reducer.counters.findCounter(SlipstreamCounter.FABRIC_SHUFFLED_MAPS).getValue());
        assertEquals(1, proxy.altered.get(), "the altered response reached the copier");
        // In this mode the MAC lets the altered byte through (the first test): what failed the fetch is Hadoop's check.
        assertEquals(java.util.Set.of(HEADER_MAC_REQUEST_FLAGS), proxy.flagsSeen, "by default a reducer asks for header-only MACs");
        // Hadoop's reducer health check gives up on a reduce whose only map failed to come (as behind its own fetcher).
        Throwable failed = reducer.reported.get();
        assertTrue(failed == null || String.valueOf(failed.getMessage()).contains("MAX_FAILED_UNIQUE_FETCHES"),
                "a read error of the map, not the copier's failure: " + failed);
    }

    // ---- the NodeManager, its map outputs, the path and the reducer ----

    private void startNodeManager(String responseMac) throws Exception {
        nodeManagerPort = freePort();
        Configuration conf = new Configuration();
        conf.setInt(ShuffleHandler.SHUFFLE_PORT_CONFIG_KEY, 0);
        conf.setInt(MapReduceConf.PORT.key(), nodeManagerPort);
        conf.set(MapReduceConf.BUFFER_CAP.key(), "32m");
        conf.set(MapReduceConf.MAX_BYTES_IN_FLIGHT.key(), "4m");
        conf.set(MapReduceConf.RESPONSE_MAC.key(), responseMac);
        handler = new SlipstreamShuffleHandler();
        handler.setAuxiliaryLocalPathHandler(new LocalDirs(localDir));
        handler.init(conf);
        handler.start();
        shufflePort = ShuffleHandler.deserializeMetaData(handler.getMetaData());
        Token<JobTokenIdentifier> token = new Token<>(new JobTokenIdentifier(new Text(JOB.toString())).getBytes(), PASSWORD,
                JobTokenIdentifier.KIND_NAME, new Text("shuffle"));
        handler.initializeApplication(new ApplicationInitializationContext(USER, ApplicationId.newInstance(CLUSTER_TIMESTAMP, JOB.getId()),
                ShuffleHandler.serializeServiceData(token)));
    }

    private Path outputDir(TaskAttemptID map) {
        return localDir.resolve("usercache/" + USER + "/appcache/" + ApplicationId.newInstance(CLUSTER_TIMESTAMP, JOB.getId())
                + "/output/" + map);
    }

    /** Map 0's output as Hadoop's MapOutputBuffer writes it: an IFile segment per partition in file.out, and its index. */
    private TaskAttemptID writeMapOutput(CompressionCodec codec) throws IOException {
        TaskAttemptID map = new TaskAttemptID(JOB.getJtIdentifier(), JOB.getId(), TaskType.MAP, 0, 0);
        Path dir = outputDir(map);
        Files.createDirectories(dir);
        JobConf conf = new JobConf();
        SpillRecord index = new SpillRecord(PARTITIONS);
        FileSystem raw = FileSystem.getLocal(conf).getRaw();
        try (FSDataOutputStream out = raw.create(new org.apache.hadoop.fs.Path(dir.resolve("file.out").toString()))) {
            for (int p = 0; p < PARTITIONS; p++) {
                long start = out.getPos();
                IFile.Writer<Text, Text> writer = new IFile.Writer<>(conf, out, Text.class, Text.class, codec, null);
                for (int r = 0; r < RECORDS; r++) {
                    writer.append(new Text(key(r)), new Text(value(p, r)));
                }
                writer.close();
                index.putIndex(new IndexRecord(start, writer.getRawLength(), writer.getCompressedLength()), p);
            }
        }
        index.writeToFile(new org.apache.hadoop.fs.Path(dir.resolve("file.out.index").toString()), conf);
        return map;
    }

    private static String key(int record) {
        return String.format("key-%06d", record);
    }

    /** Text that compresses, but not to nothing. */
    private static String value(int partition, int record) {
        return "partition " + partition + " record " + record + " " + Long.toHexString(record * 0x9E3779B97F4A7C15L).repeat(6);
    }

    private byte[] fileBytes(TaskAttemptID map, int partition) throws IOException {
        IndexRecord record = new SpillRecord(new org.apache.hadoop.fs.Path(outputDir(map).resolve("file.out.index").toString()),
                new JobConf()).getIndex(partition);
        byte[] all = Files.readAllBytes(outputDir(map).resolve("file.out"));
        return java.util.Arrays.copyOfRange(all, (int) record.startOffset, (int) (record.startOffset + record.partLength));
    }

    /** Reads a map output's bytes through Hadoop's IFileInputStream, which checks its CRC32 at the end. */
    private static void ifileCheck(byte[] bytes) throws IOException {
        try (IFileInputStream in = new IFileInputStream(new ByteArrayInputStream(bytes), bytes.length, new JobConf())) {
            byte[] buffer = new byte[8192];
            while (in.read(buffer, 0, buffer.length) > 0) {
                // read to the end: the check is there
            }
        }
    }

    private static CompressionCodec codec(String name) {
        return switch (name) {
            case "none" -> null;
            case "deflate" -> ReflectionUtils.newInstance(DefaultCodec.class, new JobConf());
            case "bzip2" -> ReflectionUtils.newInstance(org.apache.hadoop.io.compress.BZip2Codec.class, new JobConf());
            default -> throw new IllegalArgumentException(name);
        };
    }

    private static void read(Text into, DataInputBuffer buffer) throws IOException {
        DataInputBuffer in = new DataInputBuffer();
        in.reset(buffer.getData(), buffer.getPosition(), buffer.getLength() - buffer.getPosition());
        into.readFields(in);
    }

    private Map<MapOutputBlock, byte[]> fetch(int port, ResponseMac mode, List<MapOutputBlock> blocks) throws Exception {
        FabricNode client = FabricNode.builder().poolCapBytes(32L << 20).maxMessageBytes(2 << 20).requestTimeout(Duration.ofSeconds(10))
                .start();
        closeLater.add(client);
        List<BlockFetcher.Wanted> wanted = new ArrayList<>();
        for (MapOutputBlock block : blocks) {
            wanted.add(new BlockFetcher.Wanted(block, 1000, block));
        }
        RequestAuthenticator authenticator = RequestAuthenticator.scoped(MapBlocks.scope(shufflePort, JOB),
                MapBlocks.secretText(JobTokenSecretManager.createSecretKey(PASSWORD)), mode);
        Map<MapOutputBlock, byte[]> got = new HashMap<>();
        try (BlockFetcher fetcher = new BlockFetcher(client, authenticator, new BlockFetcher.Limits(4 << 20, 4, 1 << 20, 64,
                Duration.ofSeconds(20)), Map.of(new InetSocketAddress("127.0.0.1", port), wanted))) {
            fetcher.start();
            while (fetcher.hasNext()) {
                FetchedBlock block = fetcher.next();
                got.put(block.block(), block.stream().readAllBytes());
                block.release();
            }
        }
        return got;
    }

    // ---- what the proxy alters: a FETCH response is [32-byte tag][i32 count][count x (i64 block bytes, i32 returned)][data] ----

    private static final int ENTRIES = RequestAuthenticator.TAG_BYTES + ShuffleProtocol.RESPONSE_HEADER_BYTES;

    /** Where each entry's returned bytes start in the response, or -1 for an entry that returned none. */
    private static int[] dataOffsets(ByteBuffer response) {
        int count = response.getInt(RequestAuthenticator.TAG_BYTES);
        int[] offsets = new int[count];
        int position = ENTRIES + count * ShuffleProtocol.RESPONSE_ENTRY_BYTES;
        for (int i = 0; i < count; i++) {
            int returned = response.getInt(ENTRIES + i * ShuffleProtocol.RESPONSE_ENTRY_BYTES + 8);
            offsets[i] = returned > 0 ? position : -1;
            position += returned;
        }
        return offsets;
    }

    /** Flips a byte in the middle of the first returned data block (larger than an index record); null if none. */
    private static byte[] flipDataByte(byte[] response) {
        return flipDataByte(response, -1);
    }

    /** Flips byte {@code at} (-1: the middle one) of the first returned data block; null if none. */
    private static byte[] flipDataByte(byte[] response, int at) {
        return alterEntry(response, false, (buffer, entry, offset) -> {
            int flip = offset + (at >= 0 ? at : buffer.getInt(ENTRIES + entry * ShuffleProtocol.RESPONSE_ENTRY_BYTES + 8) / 2);
            buffer.put(flip, (byte) ~buffer.get(flip));
        });
    }

    /** Says the first data block has one byte more than it has (the reader would ask for it). */
    private static byte[] growDataBlockLength(byte[] response) {
        return alterEntry(response, false, (buffer, entry, offset) -> {
            int at = ENTRIES + entry * ShuffleProtocol.RESPONSE_ENTRY_BYTES;
            buffer.putLong(at, buffer.getLong(at) + 1);
        });
    }

    /** Changes the raw (decompressed) length in the first index record returned: how much merge memory the map takes. */
    private static byte[] flipIndexRecordByte(byte[] response) {
        return alterEntry(response, true, (buffer, entry, offset) -> buffer.put(offset + 15, (byte) (buffer.get(offset + 15) ^ 1)));
    }

    private interface EntryChange {
        void apply(ByteBuffer response, int entry, int offset);
    }

    private static byte[] alterEntry(byte[] response, boolean indexRecord, EntryChange change) {
        ByteBuffer buffer = ByteBuffer.wrap(response);
        int[] offsets = dataOffsets(buffer);
        for (int i = 0; i < offsets.length; i++) {
            long blockBytes = buffer.getLong(ENTRIES + i * ShuffleProtocol.RESPONSE_ENTRY_BYTES);
            if (offsets[i] >= 0 && (blockBytes == MapBlocks.INDEX_RECORD_BYTES) == indexRecord) {
                change.apply(buffer, i, offsets[i]);
                return response;
            }
        }
        return null;
    }

    /** Applies {@code alteration} to the first response it can alter, passes the others on unchanged. */
    private static UnaryOperator<byte[]> flipOnce(UnaryOperator<byte[]> alteration) {
        java.util.concurrent.atomic.AtomicBoolean done = new java.util.concurrent.atomic.AtomicBoolean();
        return response -> {
            if (done.get()) {
                return response;
            }
            byte[] altered = alteration.apply(response.clone());
            if (altered == null) {
                return response;
            }
            done.set(true);
            return altered;
        };
    }

    private Proxy proxy() throws Exception {
        Proxy proxy = new Proxy(new InetSocketAddress("127.0.0.1", nodeManagerPort));
        closeLater.add(proxy);
        return proxy;
    }

    /**
     * A fabric node on the path between reducers and the NodeManager: it forwards each request to
     * the NodeManager and each answer (or failure) back, through {@link #requests} and
     * {@link #responses}, which may alter them.
     */
    private static final class Proxy implements AutoCloseable {
        final FabricNode node;
        final int port;
        /** Responses passed on altered. */
        final AtomicInteger altered = new AtomicInteger();
        /** The flags byte of each request as sent (before {@link #requests}). */
        final java.util.Set<Byte> flagsSeen = ConcurrentHashMap.newKeySet();
        volatile UnaryOperator<byte[]> requests = UnaryOperator.identity();
        volatile UnaryOperator<byte[]> responses = UnaryOperator.identity();

        Proxy(InetSocketAddress nodeManager) throws Exception {
            port = freePort();
            node = FabricNode.builder().listen("127.0.0.1", port).poolCapBytes(32L << 20).maxMessageBytes(2 << 20)
                    .requestTimeout(Duration.ofSeconds(10)).start();
            FabricEndpoint upstream = node.endpoint(nodeManager);
            // A failed upstream request throws here, and the fabric fails this request with its text.
            node.serve(request -> {
                byte[] sent = bytes(request.payloadBuffer());
                flagsSeen.add(sent[1]);
                byte[] payload = requests.apply(sent);
                byte[] answer;
                try (FabricBuffer response = upstream.request(request.op(), ByteBuffer.wrap(payload))) {
                    answer = bytes(response.byteBuffer());
                }
                byte[] passed = responses.apply(answer);
                if (passed != answer) {
                    altered.incrementAndGet();
                }
                request.respond(passed);
            }, 2);
        }

        private static byte[] bytes(ByteBuffer buffer) {
            byte[] bytes = new byte[buffer.remaining()];
            buffer.duplicate().get(bytes);
            return bytes;
        }

        @Override
        public void close() {
            node.close();
        }
    }

    /** A reduce task's copier with Hadoop's real scheduler and merge manager, fetching map 0's partition 0 through the proxy. */
    private final class Reducer implements AutoCloseable {
        final Counters counters = new Counters();
        final AtomicReference<Throwable> reported = new AtomicReference<>();
        final ShuffleSchedulerImpl<Text, Text> scheduler;
        final MergeManagerImpl<Text, Text> merger;
        final FabricCopier<Text, Text> copier;
        final FabricNode node;
        private boolean mergerClosed;

        Reducer(Proxy proxy, CompressionCodec codec, TaskAttemptID mapWritten) throws Exception {
            JobConf job = new JobConf();
            job.set(MRConfig.LOCAL_DIR, localDir.resolve("reducer").toString());
            job.setNumMapTasks(1);
            job.setMapOutputKeyClass(Text.class);
            job.setMapOutputValueClass(Text.class);
            job.set(MapReduceConf.FALLBACK.key(), "never");
            job.setInt(MapReduceConf.PORT.key(), proxy.port);
            job.set(MapReduceConf.BUFFER_CAP.key(), "32m");
            job.set(MapReduceConf.MAX_BYTES_IN_FLIGHT.key(), "4m");
            job.setInt(MapReduceConf.REQUEST_TIMEOUT_MS.key(), 10_000);
            MapReduceConf conf = new MapReduceConf(job);
            TaskAttemptID reduceId = new TaskAttemptID(JOB.getJtIdentifier(), JOB.getId(), TaskType.REDUCE, 0, 0);
            // As the umbilical's completion events name it (Hadoop's scheduler casts it to the old API's class).
            TaskAttemptID map = org.apache.hadoop.mapred.TaskAttemptID.downgrade(mapWritten);
            CopierFailureTest.CountingReporter reporter = new CopierFailureTest.CountingReporter(counters);
            org.apache.hadoop.mapreduce.task.reduce.ExceptionReporter exceptions = t -> reported.compareAndSet(null, t);
            scheduler = new ShuffleSchedulerImpl<>(job, CopierFailureTest.newReduceStatus(), reduceId, exceptions, new Progress(),
                    counters.findCounter("t", "shuffled"), counters.findCounter("t", "bytes"), counters.findCounter("t", "failed"));
            MROutputFiles files = new MROutputFiles();
            files.setConf(job);
            merger = new MergeManagerImpl<>(reduceId, job, FileSystem.getLocal(job), new LocalDirAllocator(MRConfig.LOCAL_DIR), reporter,
                    codec, null, null, counters.findCounter("t", "spilled"), counters.findCounter("t", "combine"),
                    counters.findCounter("t", "merged"), exceptions, new Progress(), files);
            String host = "127.0.0.1:" + shufflePort;
            scheduler.addKnownMapOutput(host, "http://" + host + "/mapOutput?job=" + JOB + "&reduce=0&map=", map);
            node = conf.nodeBuilder().start();
            copier = new FabricCopier<>(0, node, conf, SlipstreamShuffle.copierLimits(conf, 1), job, reduceId,
                    JobTokenSecretManager.createSecretKey(PASSWORD), ConcurrentHashMap.newKeySet(), scheduler, merger, reporter,
                    ShuffleClientMetrics.create(reduceId, job), exceptions);
            copier.start();
            closeLater.add(this);
        }

        void awaitFetchFailure(TaskAttemptID map) throws Exception {
            Method count = ShuffleSchedulerImpl.class.getDeclaredMethod("fetchFailureCount", TaskAttemptID.class);
            count.setAccessible(true);
            TaskAttemptID named = org.apache.hadoop.mapred.TaskAttemptID.downgrade(map);
            await(() -> (int) count.invoke(scheduler, named) >= 1, "a fetch failure of " + map);
        }

        void await(java.util.concurrent.Callable<Boolean> condition, String what) throws Exception {
            long deadline = System.nanoTime() + WAIT_MS * 1_000_000;
            while (!condition.call()) {
                assertTrue(System.nanoTime() < deadline, "no " + what + " within " + WAIT_MS + " ms; counters " + counters
                        + ", exception " + reported.get());
                Thread.sleep(20);
            }
        }

        /** The merge manager's final merge (Hadoop's reducer input); closes it. */
        RawKeyValueIterator merge() throws Throwable {
            mergerClosed = true;
            return merger.close();
        }

        @Override
        public void close() throws Exception {
            copier.shutDown();
            scheduler.close();
            if (!mergerClosed) {
                try {
                    merger.close();
                } catch (Throwable e) {
                    throw new IOException("closing the merge manager", e);
                }
            }
            node.close();
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return socket.getLocalPort();
        }
    }
}
