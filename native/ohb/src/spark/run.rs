//! What one `ohb spark` run measures: tests, shuffle configurations, the workload, and the Java
//! command line and Spark settings of each application.

use std::path::PathBuf;
use std::time::Duration;

use crate::spark::{
    BUFFER_CAP_DEFAULT, BUFFER_CAP_KEY, DRIVER_HEAP, EXECUTORS, EXECUTOR_MEMORY_MIB_MAX, EXECUTOR_MEMORY_MIB_MIN,
    JAVA_MODULE_OPTIONS, MAIN_CLASS, MAPPERS_MAX, PAIRS_PER_MAPPER_MAX, PLUGIN_SHUFFLE_MANAGER, REDUCERS_MAX,
    REPEATS_MAX,
};
use crate::spark::cli::spark_size_bytes;

/// OHB's two Spark shuffle tests and two of HiBD's Spark workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SparkTest {
    GroupBy,
    SortBy,
    /// HiBD's TeraSort: 10-byte binary keys sorted unsigned (`TeraSortJob`).
    TeraSort,
    /// Three PageRank iterations over mappers x pairs pages (`PageRankJob`): small blocks.
    PageRank,
    /// A shuffle join and two aggregations over generated tables (`SqlJob`).
    Sql,
}

impl SparkTest {
    pub const ALL: [SparkTest; 5] = [SparkTest::GroupBy, SparkTest::SortBy, SparkTest::TeraSort, SparkTest::PageRank, SparkTest::Sql];

    pub fn name(self) -> &'static str {
        match self {
            SparkTest::GroupBy => "groupby",
            SparkTest::SortBy => "sortby",
            SparkTest::TeraSort => "terasort",
            SparkTest::PageRank => "pagerank",
            SparkTest::Sql => "sql",
        }
    }

    /// Whether every generated record passes one shuffle to the reducers (GroupBy, SortBy), so
    /// that Spark's shuffle records read must equal the records generated.
    pub fn one_shuffle_of_the_input(self) -> bool {
        matches!(self, SparkTest::GroupBy | SparkTest::SortBy | SparkTest::TeraSort)
    }

    pub fn parse(text: &str) -> Option<SparkTest> {
        SparkTest::ALL.into_iter().find(|t| t.name() == text)
    }

    /// The measured job, for the table's header.
    pub fn job(self, reducers: usize) -> String {
        match self {
            SparkTest::GroupBy => format!("groupByKey({reducers})"),
            SparkTest::SortBy => format!("sortByKey(true, {reducers}) (its sampling job included)"),
            SparkTest::TeraSort => format!("sortByKey(unsigned byte order of 10-byte keys, {reducers}) (its sampling job included)"),
            SparkTest::PageRank => format!("3 PageRank iterations: join (no shuffle) + reduceByKey({reducers}) of the contributions"),
            SparkTest::Sql => format!(
                "facts JOIN dims GROUP BY group, and facts GROUP BY key then by sum mod 1000 ({reducers} shuffle partitions, no broadcast, no AQE)"
            ),
        }
    }
}

/// A shuffle configuration. Names are the JSON `name`s and `--configs` words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SparkConfig {
    Vanilla,
    /// Vanilla Spark as installed: `spark.shuffle.readHostLocalDisk=true`, its default (the user's
    /// real baseline; in a one-host cluster every block is then read from disk).
    VanillaLocal,
    Plugin,
    PluginTcp,
}

impl SparkConfig {
    pub const ALL: [SparkConfig; 4] = [SparkConfig::Vanilla, SparkConfig::VanillaLocal, SparkConfig::Plugin, SparkConfig::PluginTcp];

    pub fn name(self) -> &'static str {
        match self {
            SparkConfig::Vanilla => "vanilla",
            SparkConfig::VanillaLocal => "vanilla-local",
            SparkConfig::Plugin => "plugin",
            SparkConfig::PluginTcp => "plugin-tcp",
        }
    }

    pub fn parse(text: &str) -> Option<SparkConfig> {
        SparkConfig::ALL.into_iter().find(|c| c.name() == text)
    }

    pub fn uses_plugin(self) -> bool {
        matches!(self, SparkConfig::Plugin | SparkConfig::PluginTcp)
    }

    pub fn describe(self) -> &'static str {
        match self {
            SparkConfig::Vanilla => "sort shuffle over Netty, readHostLocalDisk=false (the other executor's blocks over the network)",
            SparkConfig::VanillaLocal => "vanilla Spark's defaults: readHostLocalDisk=true (the other executor's blocks of this host read from its disk)",
            SparkConfig::Plugin => "spark.shuffle.manager=io.slipstream.spark.SlipstreamShuffleManager (fabric, default transports)",
            SparkConfig::PluginTcp => "the plugin with spark.slipstream.transport=tcp",
        }
    }
}

/// Where an application's processes run (`--hosts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SparkHosts {
    /// `local-cluster` on 127.0.0.1: driver, workers and executors on this host.
    Loopback,
    /// A standalone cluster on separate network namespaces (`spark::hosts`).
    Netns,
}

impl SparkHosts {
    pub fn parse(text: &str) -> Option<SparkHosts> {
        match text {
            "loopback" => Some(SparkHosts::Loopback),
            "netns" => Some(SparkHosts::Netns),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SparkHosts::Loopback => "loopback",
            SparkHosts::Netns => "netns",
        }
    }

    /// The driver's address (`spark.driver.host`, `SPARK_LOCAL_IP`).
    pub fn driver_address(self) -> String {
        match self {
            SparkHosts::Loopback => "127.0.0.1".into(),
            SparkHosts::Netns => crate::spark::hosts::address(0).to_string(),
        }
    }
}

/// The data: `mappers` map tasks of `pairs_per_mapper` (int, byte[value_bytes]) pairs, `reducers` reduce tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    pub mappers: usize,
    pub pairs_per_mapper: usize,
    pub value_bytes: usize,
    pub reducers: usize,
}

impl Workload {
    /// 8 x 128 Ki pairs x 1000 B: 1.0e9 bytes of values, about 1.06e9 bytes of shuffle output.
    pub const DEFAULT: Workload = Workload { mappers: 8, pairs_per_mapper: 128 << 10, value_bytes: 1000, reducers: 8 };
    /// `--quick`: 4 MB, for a smoke run.
    pub const QUICK: Workload = Workload { mappers: 2, pairs_per_mapper: 2000, value_bytes: 1000, reducers: 2 };

    pub fn records(&self) -> u64 {
        self.mappers as u64 * self.pairs_per_mapper as u64
    }

    pub fn value_bytes_total(&self) -> u64 {
        self.records() * self.value_bytes as u64
    }
}

/// One `ohb spark` invocation.
#[derive(Debug, Clone)]
pub struct SparkRun {
    pub tests: Vec<SparkTest>,
    pub configs: Vec<SparkConfig>,
    pub workload: Workload,
    pub executor_memory_mib: u64,
    pub repeats: usize,
    pub seed: u64,
    pub spark_home: PathBuf,
    pub app_jar: PathBuf,
    pub plugin_jar: PathBuf,
    pub java: PathBuf,
    /// `--conf k=v`, applied after (so over) the configuration's own settings.
    pub extra_conf: Vec<(String, String)>,
    pub timeout: Duration,
    pub log_dir: PathBuf,
    pub progress: bool,
    pub hosts: SparkHosts,
}

impl SparkRun {
    /// `local-cluster[2,1,MEM]`: each worker offers exactly the executor's memory; with `--hosts
    /// netns` the standalone Master on host 0, whose Workers do the same.
    pub fn master(&self) -> String {
        match self.hosts {
            SparkHosts::Loopback => format!("local-cluster[{EXECUTORS},1,{}]", self.executor_memory_mib),
            SparkHosts::Netns => crate::spark::hosts::master_url(),
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        let w = &self.workload;
        if w.mappers == 0 || w.mappers > MAPPERS_MAX {
            return Err(format!("--mappers must be in 1..={MAPPERS_MAX}"));
        }
        if w.pairs_per_mapper == 0 || w.pairs_per_mapper > PAIRS_PER_MAPPER_MAX {
            return Err(format!("--pairs must be in 1..={PAIRS_PER_MAPPER_MAX}"));
        }
        if w.reducers == 0 || w.reducers > REDUCERS_MAX {
            return Err(format!("--reducers must be in 1..={REDUCERS_MAX}"));
        }
        if self.repeats == 0 || self.repeats > REPEATS_MAX {
            return Err(format!("--repeats must be in 1..={REPEATS_MAX}"));
        }
        if !(EXECUTOR_MEMORY_MIB_MIN..=EXECUTOR_MEMORY_MIB_MAX).contains(&self.executor_memory_mib) {
            return Err(format!("--executor-memory must be in {EXECUTOR_MEMORY_MIB_MIN}m..={}g", EXECUTOR_MEMORY_MIB_MAX >> 10));
        }
        if self.tests.is_empty() || self.configs.is_empty() {
            return Err("nothing to run".into());
        }
        if self.timeout.is_zero() {
            return Err("--timeout-s must be positive".into());
        }
        Ok(())
    }

    /// What must exist before anything starts.
    pub fn check_files(&self) -> Result<(), String> {
        if !self.spark_home.join("jars").is_dir() {
            return Err(format!(
                "no Spark home at {} (a directory with jars/; make spark-homes builds build/spark/3.5.8, or pass --spark-home)",
                self.spark_home.display()
            ));
        }
        if !self.app_jar.is_file() {
            return Err(format!(
                "Spark bench jar not found: {} (build jvm/ohb-spark: mvn -f jvm/pom.xml package -pl ohb-spark, or pass --app-jar)",
                self.app_jar.display()
            ));
        }
        if self.configs.iter().any(|c| c.uses_plugin()) && !self.plugin_jar.is_file() {
            return Err(format!(
                "plugin jar not found: {} (build jvm/spark, pass --plugin-jar, or measure vanilla alone with --configs vanilla)",
                self.plugin_jar.display()
            ));
        }
        Ok(())
    }

    /// The Spark settings of a configuration, in order (later ones win).
    pub fn spark_conf(&self, config: SparkConfig) -> Vec<(String, String)> {
        let mut conf: Vec<(String, String)> = [
            ("spark.executor.memory", format!("{}m", self.executor_memory_mib)),
            ("spark.driver.host", self.hosts.driver_address()),
            ("spark.driver.bindAddress", self.hosts.driver_address()),
            ("spark.ui.enabled", "false".to_string()),
            // The executors load the applications' classes from here (the driver serves the jar).
            ("spark.jars", self.app_jar.display().to_string()),
            // As OHB's Scala tests get for (Int, Array[Byte]) pairs; the Java API would pick Java serialization.
            ("spark.serializer", "org.apache.spark.serializer.KryoSerializer".to_string()),
            // Every configuration: a plugin that hands some reads to Spark's own reader must not read the
            // other executor's files from disk either.
            ("spark.shuffle.readHostLocalDisk", "false".to_string()),
            // Each executor logs its collections (heap before and after), from which the memory
            // target takes the heap it kept; Spark prepends this to spark.executor.extraJavaOptions.
            ("spark.executor.defaultJavaOptions", crate::spark::heap::gc_log_option()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if self.hosts == SparkHosts::Netns {
            // local-cluster's shape on the standalone cluster: two executors of one core, one per Worker.
            conf.push(("spark.cores.max".into(), EXECUTORS.to_string()));
            conf.push(("spark.executor.cores".into(), "1".into()));
        }
        if config.uses_plugin() {
            let jar = self.plugin_jar.display().to_string();
            conf.push(("spark.shuffle.manager".into(), PLUGIN_SHUFFLE_MANAGER.into()));
            conf.push(("spark.driver.extraClassPath".into(), jar.clone()));
            conf.push(("spark.executor.extraClassPath".into(), jar));
            // A plugin configuration measures the plugin: no silent fallback to Spark's transfer
            // service (and each run checks that the fabric carried every remote byte).
            conf.push(("spark.slipstream.fallback".into(), "never".into()));
        }
        if config == SparkConfig::PluginTcp {
            conf.push(("spark.slipstream.transport".into(), "tcp".into()));
        }
        if config == SparkConfig::VanillaLocal {
            conf.retain(|(k, _)| k != "spark.shuffle.readHostLocalDisk");
            conf.push(("spark.shuffle.readHostLocalDisk".into(), "true".into()));
        }
        conf.extend(self.extra_conf.iter().cloned());
        conf
    }

    /// The plugin's buffer cap in a configuration: `--conf spark.slipstream.buffer.cap` or its default.
    pub fn buffer_cap_bytes(&self, config: SparkConfig) -> Result<u64, String> {
        let conf = self.spark_conf(config);
        let value = conf.iter().rev().find(|(k, _)| k == BUFFER_CAP_KEY).map_or(BUFFER_CAP_DEFAULT, |(_, v)| v.as_str());
        spark_size_bytes(value).map_err(|e| format!("{BUFFER_CAP_KEY}: {e}"))
    }

    /// The driver's class path: Spark's jars, the applications, the plugin for its configurations.
    pub fn class_path(&self, config: SparkConfig) -> String {
        let mut parts = vec![self.spark_home.join("jars").join("*").display().to_string(), self.app_jar.display().to_string()];
        if config.uses_plugin() {
            parts.push(self.plugin_jar.display().to_string());
        }
        parts.join(":")
    }

    /// The java command line (without the program).
    pub fn java_args(&self, test: SparkTest, config: SparkConfig) -> Vec<String> {
        let w = &self.workload;
        let mut args: Vec<String> = vec![DRIVER_HEAP.into()];
        args.extend(JAVA_MODULE_OPTIONS.iter().map(|s| s.to_string()));
        args.extend(["-cp".into(), self.class_path(config), MAIN_CLASS.into(), test.name().into()]);
        for (flag, value) in [
            ("--mappers", w.mappers.to_string()),
            ("--pairs", w.pairs_per_mapper.to_string()),
            ("--value-bytes", w.value_bytes.to_string()),
            ("--reducers", w.reducers.to_string()),
            ("--seed", self.seed.to_string()),
            ("--master", self.master()),
            ("--executors", EXECUTORS.to_string()),
        ] {
            args.extend([flag.to_string(), value]);
        }
        for (key, value) in self.spark_conf(config) {
            args.extend(["--conf".to_string(), format!("{key}={value}")]);
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use crate::spark::test_support::sample_run;
    use super::*;

    #[test]
    fn configurations_differ_only_in_the_shuffle_settings() {
        let run = sample_run();
        let get = |c: SparkConfig, k: &str| run.spark_conf(c).into_iter().rev().find(|(key, _)| key == k).map(|(_, v)| v);
        for c in SparkConfig::ALL.into_iter().filter(|c| *c != SparkConfig::VanillaLocal) {
            assert_eq!(get(c, "spark.shuffle.readHostLocalDisk").as_deref(), Some("false"));
            assert_eq!(get(c, "spark.executor.memory").as_deref(), Some("4096m"));
        }
        assert_eq!(get(SparkConfig::Vanilla, "spark.shuffle.manager"), None);
        for c in SparkConfig::ALL {
            assert_eq!(get(c, "spark.executor.defaultJavaOptions").as_deref(), Some("-Xlog:gc:file=gc.log"), "{c:?}");
        }
        assert_eq!(get(SparkConfig::Plugin, "spark.shuffle.manager").as_deref(), Some(PLUGIN_SHUFFLE_MANAGER));
        assert_eq!(get(SparkConfig::Plugin, "spark.executor.extraClassPath").as_deref(), Some("/repo/jvm/spark/target/slipstream-spark.jar"));
        assert_eq!(get(SparkConfig::Plugin, "spark.slipstream.transport"), None);
        assert_eq!(get(SparkConfig::Plugin, "spark.slipstream.fallback").as_deref(), Some("never"));
        assert_eq!(get(SparkConfig::PluginTcp, "spark.slipstream.fallback").as_deref(), Some("never"));
        assert_eq!(get(SparkConfig::Vanilla, "spark.slipstream.fallback"), None);
        assert_eq!(get(SparkConfig::Vanilla, "spark.shuffle.readHostLocalDisk").as_deref(), Some("false"));
        assert_eq!(get(SparkConfig::VanillaLocal, "spark.shuffle.readHostLocalDisk").as_deref(), Some("true"));
        assert_eq!(get(SparkConfig::VanillaLocal, "spark.shuffle.manager"), None);
        assert!(!SparkConfig::VanillaLocal.uses_plugin());
        assert_eq!(get(SparkConfig::PluginTcp, "spark.slipstream.transport").as_deref(), Some("tcp"));
        assert!(!run.class_path(SparkConfig::Vanilla).contains("slipstream-spark.jar"));
        assert!(run.class_path(SparkConfig::Plugin).ends_with(":/repo/jvm/spark/target/slipstream-spark.jar"));
        let with_extra = SparkRun { extra_conf: vec![("spark.shuffle.readHostLocalDisk".into(), "true".into())], ..sample_run() };
        let last = with_extra.spark_conf(SparkConfig::Vanilla).into_iter().rev().find(|(k, _)| k == "spark.shuffle.readHostLocalDisk");
        assert_eq!(last.unwrap().1, "true", "--conf comes last and wins");
    }

    #[test]
    fn netns_runs_on_the_standalone_master_with_the_driver_on_host_0() {
        let run = SparkRun { hosts: SparkHosts::Netns, ..sample_run() };
        assert_eq!(run.master(), "spark://198.18.79.1:7077");
        let conf = run.spark_conf(SparkConfig::Plugin);
        let get = |k: &str| conf.iter().rev().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("spark.driver.host"), Some("198.18.79.1"));
        assert_eq!(get("spark.driver.bindAddress"), Some("198.18.79.1"));
        assert_eq!((get("spark.cores.max"), get("spark.executor.cores")), (Some("2"), Some("1")));
        assert_eq!(get("spark.slipstream.fallback"), Some("never"));
        assert_eq!(sample_run().spark_conf(SparkConfig::Plugin).iter().find(|(k, _)| k == "spark.cores.max"), None);
        assert_eq!(SparkHosts::parse("netns"), Some(SparkHosts::Netns));
        assert_eq!(SparkHosts::parse("mars"), None);
    }

    #[test]
    fn java_command_line() {
        let args = sample_run().java_args(SparkTest::SortBy, SparkConfig::PluginTcp).join(" ");
        assert!(args.starts_with("-Xmx1g -XX:+IgnoreUnrecognizedVMOptions --add-opens=java.base/java.lang=ALL-UNNAMED"), "{args}");
        assert!(args.contains(
            " io.slipstream.ohb.spark.ShuffleBench sortby --mappers 8 --pairs 131072 --value-bytes 1000 --reducers 8 --seed 42 \
             --master local-cluster[2,1,4096] --executors 2 --conf "
        ), "{args}");
        assert!(args.ends_with("--conf spark.slipstream.transport=tcp"), "{args}");
    }

    #[test]
    fn missing_files_are_named() {
        let run = SparkRun { spark_home: PathBuf::from("/nonexistent/spark"), ..sample_run() };
        assert!(run.check_files().unwrap_err().contains("no Spark home"));
        let home = std::env::temp_dir().join(format!("ohb-spark-unit-{}", std::process::id()));
        std::fs::create_dir_all(home.join("jars")).unwrap();
        let run = SparkRun { spark_home: home.clone(), ..sample_run() };
        assert!(run.check_files().unwrap_err().contains("Spark bench jar not found"));
        let jar = home.join("app.jar");
        std::fs::write(&jar, b"").unwrap();
        let run = SparkRun { spark_home: home.clone(), app_jar: jar.clone(), ..sample_run() };
        assert!(run.check_files().unwrap_err().contains("--configs vanilla"));
        let run = SparkRun { configs: vec![SparkConfig::Vanilla], ..run };
        assert!(run.check_files().is_ok());
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn buffer_cap_is_read_as_spark_reads_sizes() {
        assert_eq!(spark_size_bytes("256m").unwrap(), 256 << 20);
        assert_eq!(spark_size_bytes("1G").unwrap(), 1 << 30);
        assert_eq!(spark_size_bytes("64mb").unwrap(), 64 << 20);
        assert_eq!(spark_size_bytes("512k").unwrap(), 512 << 10);
        assert_eq!(spark_size_bytes("1048576").unwrap(), 1 << 20, "no unit: bytes");
        for bad in ["", "m", "1.5g", "12x", "99999999999p"] {
            assert!(spark_size_bytes(bad).is_err(), "{bad}");
        }
        let run = sample_run();
        assert_eq!(run.buffer_cap_bytes(SparkConfig::Plugin).unwrap(), 256 << 20, "the plugin's default");
        let run = SparkRun { extra_conf: vec![(BUFFER_CAP_KEY.into(), "64m".into())], ..sample_run() };
        assert_eq!(run.buffer_cap_bytes(SparkConfig::PluginTcp).unwrap(), 64 << 20);
        let run = SparkRun { extra_conf: vec![(BUFFER_CAP_KEY.into(), "lots".into())], ..sample_run() };
        assert!(run.buffer_cap_bytes(SparkConfig::Plugin).unwrap_err().contains(BUFFER_CAP_KEY));
    }
}
