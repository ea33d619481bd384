//! The table of tests and the usage text (`ohb --help`).

/// One entry of the table of tests.
#[derive(Debug, Clone, Copy)]
pub struct TestInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub variants: &'static str,
}

/// The table of tests, as `ohb --help` lists it.
pub const TESTS: &[TestInfo] = &[
    TestInfo {
        name: "fabric lat",
        description: "round-trip latency of an echo (min / p50 / p99), one request at a time",
        variants: "fabric, fabric-tcp, rust-socket | java-socket, ucx_perftest tag_lat (2x one-way)",
    },
    TestInfo {
        name: "fabric bw",
        description: "bandwidth with a window of requests in flight answered by tiny acks",
        variants: "fabric, fabric-tcp, rust-socket | java-socket, ucx_perftest tag_bw",
    },
    TestInfo {
        name: "fabric rate",
        description: "message rate with a wider window of requests in flight",
        variants: "fabric, fabric-tcp, rust-socket | java-socket, ucx_perftest tag_bw",
    },
    TestInfo {
        name: "fabric all",
        description: "lat, bw and rate one after the other (one JSON file each)",
        variants: "as above",
    },
    TestInfo {
        name: "fabric mem",
        description: "server and client RSS under many concurrent mixed-size requests vs pool cap + overhead",
        variants: "fabric (staged handlers)",
    },
    TestInfo {
        name: "mem lat",
        description: "cache GET / SET / MIX (90:10) latency, p50 / p99 / avg, values 1 B to 512 KB",
        variants: "memcached 1.6 (TCP), cache-tcp, cache-fabric (one client library)",
    },
    TestInfo {
        name: "mem thr",
        description: "cache operations per second with N client threads, one connection each",
        variants: "memcached 1.6 (TCP), cache-tcp, cache-fabric",
    },
    TestInfo {
        name: "mem nb",
        description: "iset / iget / bset / bget in batches of --req-thresh, completed by wait or test",
        variants: "memcached 1.6 (TCP), cache-tcp, cache-fabric; each against its blocking calls",
    },
    TestInfo {
        name: "mem hybrid",
        description: "data set larger than memory (spill factor): success rate, latency with a miss penalty; fit-in-memory cost; hybrid nb",
        variants: "cache-ram, cache-hybrid (--ssd-path), memcached, memcached-ext (extstore), over TCP",
    },
    TestInfo {
        name: "mem nb --hybrid",
        description: "blocking gets vs iget / bget batches on the hybrid cache with the data spilled, over the fabric",
        variants: "cache-hybrid",
    },
    TestInfo {
        name: "spark groupby",
        description: "OHB's GroupByTest: groupByKey over a cached random data set, job / stage / fetch wait times, checksum",
        variants: "vanilla (Netty, readHostLocalDisk=false), vanilla-local (Spark's default readHostLocalDisk=true), plugin (SlipstreamShuffleManager, fallback never, fabric bytes checked), plugin-tcp",
    },
    TestInfo {
        name: "spark sortby",
        description: "OHB's SortByTest: sortByKey over the same data, the output's order and checksum checked",
        variants: "as spark groupby",
    },
    TestInfo {
        name: "spark terasort",
        description: "HiBD's TeraSort: 10-byte random binary keys with value-bytes values, sortByKey in unsigned byte order, order and checksum checked",
        variants: "as spark groupby",
    },
    TestInfo {
        name: "spark pagerank",
        description: "HiBD's PageRank: 3 iterations over mappers x pairs pages with 8 links each (fixed-point ranks), small shuffle blocks, checksum",
        variants: "as spark groupby",
    },
    TestInfo {
        name: "spark sql",
        description: "HiBD's Spark SQL: a shuffle join of a facts table (payloads of value-bytes) with a dims table and two aggregations, checksum",
        variants: "as spark groupby",
    },
    TestInfo {
        name: "mapreduce avg",
        description: "OHB's MR-AVG: maps generate pairs spread evenly over the reducers; job, shuffle and merge times",
        variants: "vanilla (Hadoop's HTTP shuffle), plugin (SlipstreamShuffle), plugin-tcp",
    },
    TestInfo {
        name: "mapreduce rand",
        description: "OHB's MR-RAND: as avg, reducers chosen pseudo-randomly",
        variants: "as mapreduce avg",
    },
    TestInfo {
        name: "mapreduce skew",
        description: "OHB's MR-SKEW: as avg, half the pairs to reducer 0",
        variants: "as mapreduce avg",
    },
    TestInfo {
        name: "mapreduce sort",
        description: "Hadoop's Sort example on RandomWriter's output (written once); outputs read back, order and CRC checked",
        variants: "as mapreduce avg",
    },
    TestInfo {
        name: "mapreduce terasort",
        description: "Hadoop's TeraGen + TeraSort on a mini HDFS beside the YARN cluster; output order and TeraValidate's checksum checked",
        variants: "as mapreduce avg",
    },
    TestInfo {
        name: "rpc lat",
        description: "Hadoop RPC echo (TestProtobufRpcProto), one client: min / p50 / p99 / avg per payload 1 B-64 KiB",
        variants: "vanilla (ProtobufRpcEngine2), fabric (FabricRpcEngine, fallback never, counter checked), fabric-tcp",
    },
    TestInfo {
        name: "rpc thr",
        description: "Hadoop RPC echo calls/s with 1 to 16 client threads (16 server handlers), CPU per call client/server",
        variants: "as rpc lat",
    },
    TestInfo {
        name: "rpc callbench",
        description: "Hadoop's own RPCCallBenchmark (hadoop-common test jar, unmodified): calls/s, CPU per call client/server",
        variants: "as rpc lat (engine chosen with rpc.engine.<TestRpcService>; counters checked after each run)",
    },
    TestInfo {
        name: "hdfs meta",
        description: "Hadoop's own NNThroughputBenchmark (create, open, fileStatus, delete) against a NameNode in its own process: ops/s",
        variants: "as rpc lat (rpc.engine.ClientNamenodeProtocolPB on both sides; client and NameNode counters checked)",
    },
    TestInfo {
        name: "hdfs swl",
        description: "OHB's HDFS SWL: create a file, write it sequentially and close it (1 MiB files, one per iteration); latency p50/p99",
        variants: "vanilla (HDFS's own writer), plugin (SlipstreamDistributedFileSystem + DataNode plugin, fabric bytes checked), plugin-tcp",
    },
    TestInfo {
        name: "hbase",
        description: "HBase's PerformanceEvaluation (sequentialWrite, randomRead, randomWrite, scanRange100; one RPC per row), one RegionServer: p50/p99/min/avg",
        variants: "netty (NettyRpcServer/Client), fabric (FabricRpcServer/Client, fallback never, counters checked), fabric-tcp",
    },
    TestInfo {
        name: "hdfs srl",
        description: "OHB's HDFS SRL: open and read a file sequentially (1 MiB files, one per iteration); latency p50/p99",
        variants: "vanilla (HDFS's TCP reader, short-circuit off), plugin (Slipstream replica accessor, fabric bytes checked), plugin-tcp, vanilla-sc (short-circuit reads: local reference)",
    },
    TestInfo {
        name: "hdfs rrl",
        description: "OHB's HDFS RRL: open a file and read 4 KiB at every 64 KiB offset in a random order; latency p50/p99",
        variants: "as hdfs srl",
    },
    TestInfo {
        name: "hdfs swt",
        description: "OHB's HDFS SWT: writers write their own files sequentially at once; aggregate MB/s",
        variants: "as hdfs swl",
    },
    TestInfo {
        name: "hdfs srt",
        description: "OHB's HDFS SRT: readers read their own files sequentially at once; aggregate MB/s",
        variants: "as hdfs srl",
    },
    TestInfo {
        name: "hdfs dfsio",
        description: "Hadoop's own TestDFSIO (3.4.2 tests jar, LocalJobRunner) -write then -read; its Throughput mb/sec",
        variants: "vanilla (short-circuit off), plugin (fallback never, client and DataNode fabric bytes checked), plugin-tcp",
    },
    TestInfo {
        name: "hdfs tiers",
        description: "Triple-H vs HDFS storage policies: SWT (acknowledged and until RAM replicas persisted) and SRT, raw tier speeds",
        variants: "hot (vanilla default policy), lazy-persist, all-ssd (vanilla policies), hhh, hhh-m, hhh-l, hhh-l-bb (jvm/hdfs-tiers; hhh-l-bb with a slipstream-cache burst buffer); placement checked",
    },
    TestInfo {
        name: "hdfs tiers skew",
        description: "Triple-H's tiering service under Zipf reads: share of reads served from SSD per window, after warm-up",
        variants: "hhh with the access tracking, the tiering service and HDFS's external StoragePolicySatisfier; contents checked",
    },
    TestInfo {
        name: "hdfs tiers dfsio",
        description: "Hadoop's own TestDFSIO -write then -read per storage configuration (as hdfs tiers lays it out); its Throughput mb/sec",
        variants: "as hdfs tiers; TestDFSIO's base directory carries the configuration's policy; placement and persistence checked",
    },
];

/// The usage text: synopsis, the table of tests, options.
pub fn usage() -> String {
    let mut text = String::from(
        "Usage: ohb fabric <test> [options]\n\
         \x20      ohb mem lat|thr|nb|hybrid|all [options]\n\
         \x20      ohb spark groupby|sortby|terasort|pagerank|sql|all [options]\n\
         \x20      ohb mapreduce avg|rand|skew|sort|terasort|all [options]\n\
         \x20      ohb rpc lat|thr|callbench [options]\n\
         \x20      ohb hbase [options]\n\
         \x20      ohb hdfs swl|srl|rrl|swt|srt|all|meta [options]\n\
         \x20      ohb hdfs dfsio [options]\n\
         \x20      ohb hdfs tiers [options]\n\
         \x20      ohb report [--input DIR] [--out DIR]\n\
         \n\
         Slipstream micro-benchmarks: the fabric side by side with plain sockets and ucx_perftest.\n\
         Servers run in their own processes on 127.0.0.1. Progress goes to stderr, the table to\n\
         stdout, the results to JSON.\n\
         \n\
         Tests:\n",
    );
    for t in TESTS {
        text += &format!("  {:<12} {}\n  {:<12}   variants: {}\n", t.name, t.description, "", t.variants);
    }
    text += r#"
Options for lat / bw / rate / all:
  --quick              few sizes (8, 4K, 64K, 1M) and a short budget: about a minute for all
  --sizes LIST         sizes, e.g. 8,4K,64K,1M (default 8 B, then powers of 4 from 16 B to 4 MiB)
  --iterations N       fixed iterations (messages for bw/rate) per point, instead of the time budget
  --warmup N           fixed warm-up count per point
  --budget-ms N        measuring time per point (default 600, quick 100)
  --window N           requests in flight for bw/rate (default 32/64 small, 8 up to 1 MiB, 4 above)
  --trials N           bw/rate trials per point, the median is reported (default 5, quick 3)
  --variants LIST      subset of fabric,fabric-tcp,rust-socket,ucx_perftest
  --fabric-copy        send with Endpoint::request(&[u8]) (a copy) instead of registered buffers
  --no-same-host-pull  fabric client with Config::same_host_pull off (large same-host messages
                       through UCX, as before the pull path), for side-by-side comparisons
  --hosts netns        client and servers on two hosts (network namespaces + veth, own IPC/PID):
                       TCP on the link, no shared memory or CMA; needs root; Rust layer only
                       (results/ohb-fabric-<test>-rust-netns.json); default: loopback
  --json PATH          where to write results (default results/ohb-fabric-<test>-<layer>.json)
  --no-progress        no progress lines on stderr
  --jvm                through the JVM bridge: runs java -cp JAR io.slipstream.ohb.FabricBench
  --jvm-jar PATH       default jvm/ohb/target/slipstream-ohb.jar under the repository root
  --java PATH          java executable (default $JAVA_HOME/bin/java, else java)
  --jvm-timeout-s N    kill the JVM bench after N seconds (default 900)

Options for mem:
  --seconds N          load duration (default 60)
  --threads N          client threads (default 16)
  --window N           requests in flight per thread (default 4)
  --max-size SIZE      largest request (default 4M); sizes are mixed 8 B..max
  --pool-cap-mib N     pool cap of both nodes (default 64)
  --overhead-mib N     allowed RSS above the pool cap (default 17: the fabric's documented 16 MiB fixed overhead + 1 MiB small-buffer reserve)
  --transport T        auto or tcp (default auto)
  --json PATH          default results/ohb-fabric-mem-rust.json

Options for mem lat / thr / nb / all (the cache; servers get -t 2 -m 1024 unless told):
  --quick              few points and short runs (about a minute for all)
  --sizes LIST         value sizes (lat default 1,32,256,1K,4K,16K,64K,512K; thr/nb 32,4K)
  --ops LIST           lat/thr: subset of GET,SET,MIX (default all)
  --iterations N       lat: measured operations per point (default 5000, quick 1000)
  --threads N          thr: client threads (default 4)
  --seconds S          thr: seconds per trial (default 2, quick 0.5)
  --trials N           thr: trials per point, median reported (default 3, quick 1)
  --reqtype LIST       nb: subset of iset,iget,bset,bget (default all)
  --progress-type T    nb: wait or test (default wait)
  --req-thresh N       nb: requests issued before completing them (default 32)
  --count N            nb: operations per pass (default 20000, quick 4000)
  --server-threads N   -t of both servers (default 2)
  --memory-mib N       -m of both servers (default 1024)
  --variants LIST      subset of memcached,cache-tcp,cache-fabric
                       (mem hybrid: subset of cache-ram,cache-hybrid,memcached,memcached-ext)
  --json PATH          default results/ohb-mem-<test>.json (nb --hybrid: ohb-mem-nb-hybrid.json)

Options for mem hybrid and mem nb --hybrid (after OHB's ohb_memhybrid; mem all runs hybrid too):
  --hybrid             nb: measure the hybrid variant (blocking get vs iget/bget over the fabric) only
  --scan MODE          uniform or normal (centred, sd = items / 6) (default uniform)
  --max-memory-mb N    -m of every server (default 64)
  --value-bytes SIZE   value size (default 4096)
  --spill-factor X     data set / memory: items = X * max-memory / value-bytes (default 1.5);
                       the SSD tier and the extstore file get 2 * X * max-memory MB
  --miss-penalty-ms X  cost of a miss, ADDED to that get's latency, not slept (default 1.5)
  --gets N             gets per server (default 100000, quick 10000)
  --clients N          client threads for the gets, one connection each (default 1)
  --seed N             seed of the key sequence, the same for every server (default 42)
  --rounds N           fit-in-memory rounds, servers rotating (default 21, quick 6)
  --count N            nb: gets per pass (default 20000, quick 4000)
  --trials N           nb: trials, modes rotated, median reported (default 3, quick 1)
  --req-thresh N       nb: gets in flight before completing them (default 32)

Options for spark groupby / sortby / terasort / pagerank / sql / all (Spark on local-cluster[2,1,MEM]: 2 executors x 1 core, own JVMs):
  --quick              2 mappers x 2000 pairs x 1000 B (4 MB), 2 reducers, 1 repeat, 1g executors
  --mappers N          map tasks (default 8)
  --pairs N            pairs per mapper (default 131072: 8 x 131072 x 1000 B = 1.0 GB of values)
  --value-bytes SIZE   value size (default 1000)
  --reducers N         reduce tasks (default 8; = --mappers when only that is given)
  --executor-memory M  per executor and worker, e.g. 4g (default 4g, quick 1g)
  --repeats N          runs per configuration, interleaved (order rotated each round), medians reported
                       (default: one per configuration, at least 3, so each runs once in every position; quick 1)
  --configs LIST       subset of vanilla,vanilla-local,plugin,plugin-tcp (default all four)
  --conf KEY=VALUE     extra Spark setting for every configuration (repeatable; wins over ours)
  --seed N             seed of the generated data (default 42)
  --hosts netns        a standalone cluster per application instead of local-cluster: Master and driver
                       on one host, each executor's Worker on another (network namespaces joined by a
                       bridge, own IPC/PID, private /dev/shm): the shuffle crosses TCP links (root;
                       configs default to vanilla,plugin,plugin-tcp)
  --spark-home DIR     a directory with jars/ (default build/spark/3.5.8)
  --plugin-jar PATH    default jvm/spark/target/slipstream-spark.jar
  --app-jar PATH       default jvm/ohb-spark/target/slipstream-ohb-spark.jar
  --java PATH          java executable (default $JAVA_HOME/bin/java, else java)
  --timeout-s N        kill an application after N seconds (default 600, quick 180)
  --log-dir DIR        drivers' output and executors' logs, one directory per run, earlier ones
                       removed (default build/ohb-spark)
  --json PATH          default results/ohb-spark-<test>.json (all: one file with both tests)

Options for mapreduce avg / rand / skew / sort / terasort / all (Hadoop 3.4 mini YARN cluster of 2 NodeManagers, reducers in
their own JVMs, reducers start after the last map):
  --quick              2 maps x 2 reducers x 20000 records x 100 B (4 MB)
  --maps N             map tasks (default 4)
  --reduces N          reduce tasks (default 4)
  --records N          records per map (default 262144: 4 x 262144 x 1000 B = 1.05 GB)
  --value-bytes N      value size (default 1000; not terasort: TeraGen's records are 10 + 90 bytes)
  --runs N             jobs per configuration, medians reported (default 1)
  --json PATH          default results/ohb-mapreduce-<test>.json

Options for rpc lat / thr (Hadoop 3.4 RPC server in its own JVM, 16 handlers; clients in the bench's JVM):
  --quick              sizes 1,4096,65536, 500 calls each; 1 and 8 clients for 0.5 s
  --sizes LIST         lat: payload bytes (default 1,64,1024,4096,16384,65536)
  --iterations N       lat: measured calls per point (default 5000)
  --warmup N           lat: calls before measuring (default 20000: fewer measure the JIT)
  --clients LIST       thr: client threads (default 1,2,4,8,16)
  --thr-bytes N        thr: payload bytes (default 1024)
  --duration-ms N      thr: measuring time per point (default 2000)
  --warmup-ms N        thr: calling time before each point (default 5000; --quick: 500)
  --configs LIST       subset of vanilla,fabric,fabric-tcp
  --json PATH          default results/ohb-rpc-<test>.json

Options for rpc callbench (Hadoop's RPCCallBenchmark, its server and clients in one JVM per configuration):
  --quick              1 and 8 clients, 4 s each
  --clients LIST       the tool's -c per point (default 1,8,16)
  --handlers N         the tool's -s (default 16)
  --bytes N            the tool's -m (default 1024)
  --seconds N          the tool's -t (default 15)
  --configs LIST       subset of vanilla,fabric,fabric-tcp
  --json PATH          default results/ohb-rpc-callbench.json

Options for hbase (HBase 2.6 mini cluster with one RegionServer in its own JVM per configuration; the
PerformanceEvaluation client in a JVM of its own per configuration):
  --quick              1000 rows after 1000 of warm-up
  --rows N             rows measured per test (default 20000)
  --warmup N           rows run first and left out of the report (default 20000; --measureAfter)
  --configs LIST       subset of netty,fabric,fabric-tcp, run in the order given
  --json PATH          default results/ohb-hbase-pe.json

Options for hdfs swl / srl / rrl / swt / srt / all (Hadoop 3.4 mini HDFS cluster, 3 DataNodes, replication 3,
one JVM per configuration, the reader or writer in it):
  --quick              5 iterations; swt/srt: 2 writers/readers x 16 MiB, 2 runs
  --file-bytes N       file size (default 1 MiB for swl/srl/rrl, 256 MiB per writer/reader for swt/srt)
  --block-bytes N      HDFS block size (default 128 MiB)
  --readers N          swt's writers / srt's readers, each on its own file (default 2)
  --seek-bytes N       rrl's interval between reads (default 64 KiB)
  --read-bytes N       rrl's read size (default 4 KiB)
  --iterations N       files written or read (swl/srl/rrl, default 20, one per iteration) or swt/srt runs (default 10);
                       medians reported
  --configs LIST       subset of vanilla,plugin,plugin-tcp,vanilla-sc (vanilla required)
  --json PATH          default results/ohb-hdfs-<test>.json

Options for hdfs meta (Hadoop's NNThroughputBenchmark in one JVM per configuration, its NameNode in another):
  --quick              500 files per operation
  --ops LIST           subset of create,open,fileStatus,delete (default all, in that order)
  --files N            the tool's -files (default 5000)
  --threads N          the tool's -threads (default 8)
  --configs LIST       subset of vanilla,fabric,fabric-tcp
  --json PATH          default results/ohb-hdfs-meta.json

Options for hdfs dfsio (Hadoop's TestDFSIO, unmodified, on a 3-DataNode mini cluster in each configuration's JVM):
  --quick              2 files x 16 MiB, one round (default 2 x 256 MiB, 3 rounds)
  --files N            TestDFSIO's -nrFiles (1 to 64)
  --file-bytes N       TestDFSIO's -size, in bytes
  --block-bytes N      HDFS block size (default 128 MiB)
  --maps N             map tasks the LocalJobRunner runs at once (default 2)
  --rounds N           rounds of all configurations, order rotated each round; medians shown (default 3, --quick 1)
  --configs LIST       subset of vanilla,plugin,plugin-tcp (vanilla required)
  --json PATH          default results/ohb-hdfs-dfsio.json

Options for hdfs tiers (Hadoop 3.4 mini HDFS cluster per configuration, 3 DataNodes each with a RAM_DISK
directory on tmpfs, an SSD and a DISK directory on the disk; replication 3):
  --quick              2 writers x 16 MiB files, 4 MiB blocks, 3 runs, 1 round, 64 MiB raw (about 2 minutes)
  --writers N          writers, then as many readers, each on its own file (default 2)
  --file-bytes N       file size (default 128 MiB)
  --block-bytes N      HDFS block size, a multiple of 4096 (default 64 MiB)
  --runs N             timed runs after one warm-up file per writer; medians reported (default 3)
  --rounds N           JVMs per configuration, configurations interleaved; medians (default 3, quick 1)
  --raw-bytes N        file written and read per tier directory for its raw speed (default 256 MiB)
  --configs LIST       subset of hot,lazy-persist,all-ssd,hhh,hhh-m,hhh-l,hhh-l-bb (hot required; hhh-l and
                       hhh-l-bb add an ARCHIVE directory per DataNode, hhh-l-bb starts slipstream-cache)
  --shm-dir DIR        the tmpfs for the RAM_DISK directories (default /dev/shm; refused if not tmpfs)
  --sync-on-close      dfs.datanode.synconclose on for every configuration (HDFS's default: off)
  --json PATH          default results/ohb-hdfs-tiers.json
  dfsio                Hadoop's TestDFSIO instead of SWT/SRT (ohb hdfs tiers dfsio --help): --quick (2 x 16 MiB
                       files, 4 MiB blocks, 1 round; default 2 x 256 MiB, 64 MiB blocks, 3 rounds), --files N,
                       --file-bytes N, --block-bytes N, --rounds N, --configs, --sync-on-close, --warmup-passes N
                       (unmeasured passes per JVM first; default 1, quick 0), --shm-dir, --json (default
                       results/ohb-hdfs-tiers-dfsio.json)

Options for report (results as charts, an HTML page and a Markdown summary):
  --input DIR          the JSON files to draw (default results/ under the repository root)
  --out DIR            where index.html, summary.md and charts/ go (default report/)

Exit status: 0 when every point was measured, 2 on bad arguments or when any point failed (each
failed point and why on stderr, after the table and the JSON).

Examples:
  ohb fabric lat --quick
  ohb fabric all
  ohb fabric bw --sizes 64K,1M,4M --variants fabric,ucx_perftest
  ohb fabric lat --jvm
  ohb fabric mem --seconds 60
  ohb mem all --quick
  ohb mem thr --threads 4 --sizes 32,4K --ops GET,SET
  ohb mem hybrid --gets 2000
  ohb mem hybrid --scan normal --spill-factor 2
  ohb mem nb --hybrid
  ohb spark all --quick
  ohb spark groupby --configs vanilla --repeats 1
  ohb mapreduce avg --quick
  ohb rpc lat --quick
  ohb rpc callbench --quick
  ohb hdfs meta --quick
  ohb hbase --quick
  ohb hdfs tiers --quick
  ohb hdfs tiers dfsio --quick --configs hot,hhh
  ohb report --input results --out report
"#;
    text
}
