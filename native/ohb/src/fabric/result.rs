//! Results and their JSON form, shared with the JVM bench (`io.slipstream.ohb.FabricBench`):
//!
//! ```json
//! {"bench":"fabric lat","layer":"rust","machine":{"cpus":2,"model":"..","kernel":"..","ucx":"1.13.1"},
//!  "variants":[{"name":"fabric","points":[{"size_bytes":8,"iterations":1000,"lat_us_min":1.2,
//!    "lat_us_p50":1.5,"lat_us_p99":3.0,"bw_mb_s":null,"msg_rate":null}]}]}
//! ```
//! Latencies are round trips in microseconds (for `ucx_perftest`, 2x its one-way figure; the one-way
//! figure is kept as `one_way_us_p50`). MB is 2^20 bytes, as `ucx_perftest` prints. Fields beyond the
//! shared schema (`window`, `one_way_us_p50`, `error`, `units`, `notes`) are optional for readers.

use serde_json::{json, Map, Value};

use crate::args::format_size;
use crate::machine::Machine;
use crate::table::first_line;

/// What a test measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Round-trip latency of an echo of each size.
    Lat,
    /// Bandwidth with a window of in-flight requests answered by tiny acks.
    Bw,
    /// Message rate with a wider window of in-flight requests answered by tiny acks.
    Rate,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Lat, Mode::Bw, Mode::Rate];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Lat => "lat",
            Mode::Bw => "bw",
            Mode::Rate => "rate",
        }
    }

    pub fn parse(text: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == text)
    }
}

/// A measured party. Names are the JSON `name`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// The fabric with default transports (UCX selects).
    Fabric,
    /// The fabric forced to TCP.
    FabricTcp,
    /// Blocking std::net sockets, length-prefixed frames, TCP_NODELAY.
    RustSocket,
    /// Blocking java.net sockets (the JVM bench measures these).
    JavaSocket,
    /// `ucx_perftest` tag_lat / tag_bw: raw UCX, the reference.
    UcxPerftest,
}

impl Variant {
    pub const RUST: [Variant; 4] = [Variant::Fabric, Variant::FabricTcp, Variant::RustSocket, Variant::UcxPerftest];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Fabric => "fabric",
            Variant::FabricTcp => "fabric-tcp",
            Variant::RustSocket => "rust-socket",
            Variant::JavaSocket => "java-socket",
            Variant::UcxPerftest => "ucx_perftest",
        }
    }

    pub fn parse(text: &str) -> Option<Variant> {
        [Variant::Fabric, Variant::FabricTcp, Variant::RustSocket, Variant::JavaSocket, Variant::UcxPerftest]
            .into_iter()
            .find(|v| v.name() == text)
    }
}

/// One size of one variant. `None` fields were not measured (or failed: see `error`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Point {
    pub size_bytes: usize,
    pub iterations: u64,
    pub lat_us_min: Option<f64>,
    pub lat_us_p50: Option<f64>,
    pub lat_us_p99: Option<f64>,
    pub bw_mb_s: Option<f64>,
    pub msg_rate: Option<f64>,
    /// Requests in flight (bw / rate).
    pub window: Option<usize>,
    /// bw / rate: the message rate of each trial (the point reports their median).
    pub trial_msg_rates: Vec<f64>,
    /// `ucx_perftest` only: its own (one-way) median latency.
    pub one_way_us_p50: Option<f64>,
    pub error: Option<String>,
}

impl Point {
    pub fn failed(size_bytes: usize, error: String) -> Point {
        Point { size_bytes, error: Some(error), ..Point::default() }
    }

    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("size_bytes".into(), json!(self.size_bytes));
        m.insert("iterations".into(), json!(self.iterations));
        m.insert("lat_us_min".into(), number(self.lat_us_min));
        m.insert("lat_us_p50".into(), number(self.lat_us_p50));
        m.insert("lat_us_p99".into(), number(self.lat_us_p99));
        m.insert("bw_mb_s".into(), number(self.bw_mb_s));
        m.insert("msg_rate".into(), number(self.msg_rate));
        if let Some(w) = self.window {
            m.insert("window".into(), json!(w));
        }
        if !self.trial_msg_rates.is_empty() {
            m.insert("trial_msg_rates".into(), self.trial_msg_rates.iter().map(|r| number(Some(*r))).collect());
        }
        if let Some(v) = self.one_way_us_p50 {
            m.insert("one_way_us_p50".into(), number(Some(v)));
        }
        if let Some(e) = &self.error {
            m.insert("error".into(), json!(e));
        }
        Value::Object(m)
    }

    pub fn from_json(v: &Value) -> Result<Point, String> {
        let size_bytes =
            v.get("size_bytes").and_then(Value::as_u64).ok_or_else(|| format!("point without size_bytes: {v}"))?
                as usize;
        let float = |k: &str| v.get(k).and_then(Value::as_f64);
        Ok(Point {
            size_bytes,
            iterations: v.get("iterations").and_then(Value::as_u64).unwrap_or(0),
            lat_us_min: float("lat_us_min"),
            lat_us_p50: float("lat_us_p50"),
            lat_us_p99: float("lat_us_p99"),
            bw_mb_s: float("bw_mb_s"),
            msg_rate: float("msg_rate"),
            window: v.get("window").and_then(Value::as_u64).map(|w| w as usize),
            trial_msg_rates: v
                .get("trial_msg_rates")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default(),
            one_way_us_p50: float("one_way_us_p50"),
            error: v.get("error").and_then(Value::as_str).map(str::to_string),
        })
    }
}

/// JSON numbers cannot be NaN or infinite: those become null.
fn number(v: Option<f64>) -> Value {
    match v {
        Some(x) if x.is_finite() => json!(x),
        _ => Value::Null,
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct VariantResult {
    pub name: String,
    pub points: Vec<Point>,
    /// Why the variant stopped early (the JVM bench reports this per variant).
    pub error: Option<String>,
}

impl VariantResult {
    pub fn point(&self, size_bytes: usize) -> Option<&Point> {
        self.points.iter().find(|p| p.size_bytes == size_bytes)
    }
}

/// One run of one test at one layer.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchResult {
    /// "fabric lat", "fabric bw", "fabric rate".
    pub bench: String,
    /// "rust" or "jvm".
    pub layer: String,
    pub machine: Machine,
    pub variants: Vec<VariantResult>,
    /// Free-form lines about how the run was made (windows, iteration policy).
    pub notes: Vec<String>,
}

impl BenchResult {
    pub fn mode(&self) -> Option<Mode> {
        Mode::parse(self.bench.rsplit(' ').next()?)
    }

    pub fn variant(&self, name: &str) -> Option<&VariantResult> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// Every failed point as "VARIANT SIZE: why", and every variant that stopped with no point
    /// carrying its error as "VARIANT: why".
    pub fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        for v in &self.variants {
            for p in &v.points {
                if let Some(e) = &p.error {
                    failures.push(format!("{} {}: {}", v.name, format_size(p.size_bytes), first_line(e)));
                }
            }
            if let Some(e) = v.error.as_ref().filter(|_| v.points.iter().all(|p| p.error.is_none())) {
                failures.push(format!("{}: {}", v.name, first_line(e)));
            }
        }
        failures
    }

    /// Every size any variant measured, ascending.
    pub fn sizes(&self) -> Vec<usize> {
        let mut sizes: Vec<usize> = self.variants.iter().flat_map(|v| v.points.iter().map(|p| p.size_bytes)).collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }

    pub fn to_json(&self) -> Value {
        json!({
            "bench": self.bench,
            "layer": self.layer,
            "machine": self.machine.to_json(),
            "units": {"lat": "us, round trip", "bw": "MB/s, MB = 2^20 bytes", "msg_rate": "messages/s"},
            "notes": self.notes,
            "variants": self.variants.iter().map(|v| {
                let mut m = Map::new();
                m.insert("name".into(), json!(v.name));
                if let Some(e) = &v.error {
                    m.insert("error".into(), json!(e));
                }
                m.insert("points".into(), Value::Array(v.points.iter().map(Point::to_json).collect()));
                Value::Object(m)
            }).collect::<Vec<_>>(),
        })
    }

    pub fn from_json(v: &Value) -> Result<BenchResult, String> {
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let bench = text("bench").ok_or("result without \"bench\"")?;
        let layer = text("layer").ok_or("result without \"layer\"")?;
        let machine = v.get("machine").map(Machine::from_json).unwrap_or_default();
        let mut variants = Vec::new();
        for var in v.get("variants").and_then(Value::as_array).ok_or("result without \"variants\" array")? {
            let name = var.get("name").and_then(Value::as_str).ok_or("variant without \"name\"")?.to_string();
            let points = var
                .get("points")
                .and_then(Value::as_array)
                .ok_or_else(|| format!("variant {name} without \"points\" array"))?
                .iter()
                .map(Point::from_json)
                .collect::<Result<Vec<_>, _>>()?;
            let error = var.get("error").and_then(Value::as_str).map(str::to_string);
            variants.push(VariantResult { name, points, error });
        }
        let notes = v
            .get("notes")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        Ok(BenchResult { bench, layer, machine, variants, notes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip() {
        let result = BenchResult {
            bench: "fabric lat".into(),
            layer: "rust".into(),
            machine: Machine { cpus: 2, model: "cpu".into(), kernel: "6.1".into(), ucx: "1.13.1".into(), tcp_congestion: String::new() },
            variants: vec![VariantResult {
                error: None,
                name: "ucx_perftest".into(),
                points: vec![
                    Point {
                        size_bytes: 8,
                        iterations: 100,
                        lat_us_p50: Some(0.4),
                        one_way_us_p50: Some(0.2),
                        ..Point::default()
                    },
                    Point::failed(4096, "boom".into()),
                ],
            }],
            notes: vec!["window 32".into()],
        };
        let text = serde_json::to_string(&result.to_json()).unwrap();
        assert!(text.contains("\"lat_us_min\":null"), "{text}");
        let back = BenchResult::from_json(&serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(back, result);
        assert_eq!(back.mode(), Some(Mode::Lat));
        assert_eq!(back.sizes(), vec![8, 4096]);
        assert_eq!(back.failures(), vec!["ucx_perftest 4 KiB: boom".to_string()]);
    }

    #[test]
    fn a_variant_that_stopped_before_any_point_is_a_failure() {
        let mut result = BenchResult {
            bench: "fabric lat".into(),
            layer: "jvm".into(),
            machine: Machine::default(),
            variants: vec![VariantResult { name: "fabric".into(), points: vec![], error: Some("unavailable\nmore".into()) }],
            notes: vec![],
        };
        assert_eq!(result.failures(), vec!["fabric: unavailable".to_string()]);
        result.variants[0].points.push(Point::failed(8, "unavailable".into()));
        assert_eq!(result.failures(), vec!["fabric 8 B: unavailable".to_string()], "listed once, by point");
    }

    #[test]
    fn reads_minimal_jvm_json() {
        let text = r#"{"bench":"fabric bw","layer":"jvm","machine":{"cpus":2},
            "variants":[{"name":"java-socket","points":[{"size_bytes":1048576,"iterations":50,
            "lat_us_min":null,"lat_us_p50":null,"lat_us_p99":null,"bw_mb_s":900.5,"msg_rate":900.5}]}]}"#;
        let r = BenchResult::from_json(&serde_json::from_str(text).unwrap()).unwrap();
        assert_eq!(r.mode(), Some(Mode::Bw));
        assert_eq!(r.machine.cpus, 2);
        let p = r.variant("java-socket").unwrap().point(1 << 20).unwrap();
        assert_eq!(p.bw_mb_s, Some(900.5));
        assert!(BenchResult::from_json(&serde_json::json!({"bench": "x"})).is_err());
    }

    #[test]
    fn names_parse_back() {
        for m in Mode::ALL {
            assert_eq!(Mode::parse(m.name()), Some(m));
        }
        for v in [Variant::Fabric, Variant::FabricTcp, Variant::RustSocket, Variant::JavaSocket, Variant::UcxPerftest] {
            assert_eq!(Variant::parse(v.name()), Some(v));
        }
        assert_eq!(Variant::parse("nope"), None);
    }
}
