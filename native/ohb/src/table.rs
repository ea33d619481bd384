//! Shared by every suite's tables: number formats and the target checks a run reports.

use serde_json::{json, Value};

/// `1.23x`; small ratios keep two significant digits (`0.013x`, `0.0021x`).
pub fn format_ratio(x: f64) -> String {
    if x >= 0.095 {
        format!("{x:.2}x")
    } else if x >= 0.0095 {
        format!("{x:.3}x")
    } else {
        format!("{x:.4}x")
    }
}

pub fn format_us(us: f64) -> String {
    if us < 10.0 {
        format!("{us:.2}")
    } else if us < 1000.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.0}")
    }
}

pub fn format_mb_s(mb_s: f64) -> String {
    if mb_s < 10.0 {
        format!("{mb_s:.2}")
    } else if mb_s < 100.0 {
        format!("{mb_s:.1}")
    } else {
        format!("{mb_s:.0}")
    }
}

pub fn format_rate(rate: f64) -> String {
    if rate >= 1e6 {
        format!("{:.2}M", rate / 1e6)
    } else if rate >= 1e3 {
        format!("{:.1}k", rate / 1e3)
    } else {
        format!("{rate:.0}")
    }
}

/// One target the issue asks the table to make visible.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub name: String,
    pub ratio: Option<f64>,
    /// `None` when the target states no threshold (the ratio is reported).
    pub pass: Option<bool>,
    pub detail: String,
}

impl Check {
    pub fn to_json(&self) -> Value {
        json!({"name": self.name, "ratio": self.ratio, "pass": self.pass, "detail": self.detail})
    }
}

/// The first line of a (possibly multi-line) message, for a table cell or a progress line.
pub fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(format_ratio(1.234), "1.23x");
        assert_eq!(format_ratio(0.0132), "0.013x");
        assert_eq!(format_ratio(0.00213), "0.0021x");
        assert_eq!(format_us(1.234), "1.23");
        assert_eq!(format_us(123.45), "123.5");
        assert_eq!(format_us(12345.6), "12346");
        assert_eq!(format_rate(1_234_567.0), "1.23M");
        assert_eq!(format_rate(45_600.0), "45.6k");
        assert_eq!(format_mb_s(11469.2), "11469");
    }
}
