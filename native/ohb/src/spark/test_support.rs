//! Fixtures shared by the Spark suite's unit tests.

use std::path::PathBuf;

use crate::spark::{SparkRun, APP_TIMEOUT_DEFAULT, RESULT_PREFIX};
use crate::spark::app::{parse_result_line, AppResult};
use crate::spark::run::{SparkConfig, SparkTest, Workload};

pub(super) fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

pub(super) fn sample_run() -> SparkRun {
    SparkRun {
        tests: SparkTest::ALL.to_vec(),
        configs: SparkConfig::ALL.to_vec(),
        workload: Workload::DEFAULT,
        executor_memory_mib: 4096,
        repeats: 3,
        seed: 42,
        spark_home: PathBuf::from("/repo/build/spark/3.5.8"),
        app_jar: PathBuf::from("/repo/jvm/ohb-spark/target/slipstream-ohb-spark.jar"),
        plugin_jar: PathBuf::from("/repo/jvm/spark/target/slipstream-spark.jar"),
        java: PathBuf::from("java"),
        extra_conf: vec![],
        timeout: APP_TIMEOUT_DEFAULT,
        log_dir: PathBuf::from("/tmp/ohb-spark-test"),
        progress: false,
        hosts: crate::spark::run::SparkHosts::Loopback,
    }
}

pub(super) fn result_line(checksum: &str, job_ns: u64, fetch_wait_ms: u64) -> String {
    format!(
        "{RESULT_PREFIX}{{\"test\":\"groupby\",\"spark_version\":\"3.5.8\",\"shuffle_manager\":\"sort\",\"job_ns\":{job_ns},\
         \"job_ms\":{},\"map_stage_ms\":8000,\"reduce_stage_ms\":10000,\"other_stages_ms\":0,\"fetch_wait_ms\":{fetch_wait_ms},\
         \"remote_bytes_read\":500,\"local_bytes_read\":500,\"shuffle_write_bytes\":1000,\"records_read\":16,\"records\":16,\
         \"input_cached_partitions\":2,\"failed_tasks\":0,\"stage_attempts\":2,\"gc_ms\":10,\"generate_ms\":100,\
         \"ordered\":true,\"checksum\":\"{checksum}\",\"stages\":[]}}",
        job_ns / 1_000_000
    )
}

/// A plugin run's result: as [`app`], with every remote byte counted by the fabric.
pub(super) fn plugin_app(checksum: &str, job_ms: u64, fetch_wait_ms: u64) -> AppResult {
    let mut r = app(checksum, job_ms, fetch_wait_ms);
    r.fabric_remote_bytes = Some(r.remote_bytes_read);
    r.fabric_counting_executors = 2;
    r.executors_probed = 2;
    r
}

pub(super) fn app(checksum: &str, job_ms: u64, fetch_wait_ms: u64) -> AppResult {
    let v = parse_result_line(&result_line(checksum, job_ms * 1_000_000, fetch_wait_ms)).unwrap();
    AppResult::from_json(&v, 30.0).unwrap()
}

pub(super) const TINY: Workload = Workload { mappers: 2, pairs_per_mapper: 8, value_bytes: 10, reducers: 2 };
