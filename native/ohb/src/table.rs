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

/// The lowest ratio among a test's points and the point's label, for a target that every point
/// must meet ("forced to TCP, never below 0.9x").
#[derive(Debug, Default)]
pub struct Worst {
    worst: Option<(f64, String)>,
}

impl Worst {
    pub fn see(&mut self, ratio: Option<f64>, label: impl std::fmt::Display) {
        if let Some(r) = ratio {
            if self.worst.as_ref().is_none_or(|w| r < w.0) {
                self.worst = Some((r, label.to_string()));
            }
        }
    }

    /// The check of `target` on the worst point; `detail` names it from its label.
    pub fn check(&self, name: String, target: f64, detail: impl Fn(&str) -> String) -> Check {
        let ratio = self.worst.as_ref().map(|w| w.0);
        let detail = self.worst.as_ref().map(|w| detail(&w.1)).unwrap_or_default();
        Check { name, ratio, pass: ratio.map(|r| r >= target), detail }
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
    /// A target met when `ratio` is at least `target` (not measured: no verdict).
    pub fn at_least(name: String, ratio: Option<f64>, target: f64) -> Check {
        Check { name, ratio, pass: ratio.map(|r| r >= target), detail: String::new() }
    }

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

    #[test]
    fn worst_keeps_the_lowest_ratio_and_its_label_and_judges_it() {
        let mut worst = Worst::default();
        let none = worst.check("never".into(), 0.9, |l| format!("at {l}"));
        assert_eq!((none.ratio, none.pass, none.detail.as_str()), (None, None, ""), "no point: no verdict");
        worst.see(Some(1.2), 8);
        worst.see(None, 16);
        worst.see(Some(0.85), 64);
        worst.see(Some(0.95), 256);
        let check = worst.check("tcp".into(), 0.9, |l| format!("worst at {l} B"));
        assert_eq!((check.ratio, check.pass, check.detail.as_str()), (Some(0.85), Some(false), "worst at 64 B"));
        assert_eq!(Check::at_least("x".into(), Some(2.0), 2.0).pass, Some(true), "at the target is met");
        assert_eq!(Check::at_least("x".into(), None, 2.0).pass, None);
    }

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
