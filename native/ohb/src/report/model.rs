//! What a report shows, independent of how it is drawn: runs (one per JSON file), each with its
//! charts, tables and targets.

/// Series drawn in the baseline colour: the default a variant replaces (sockets, memcached, Spark's
/// own shuffle) and the 1.00x line of ratio charts. The same colour in every chart.
pub const BASELINE_SERIES: &[&str] = &["rust-socket", "java-socket", "memcached", "vanilla", "equal (1.00x)"];

/// Lines drawn for reading a chart, not measured: left out of the data tables.
pub const REFERENCE_LINES: &[&str] = &["equal (1.00x)"];

/// One JSON file `ohb` wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The file's name under the input directory.
    pub file: String,
    /// `fabric lat`, `mem hybrid`, `spark all`, ...
    pub bench: String,
    /// "2 x AMD EPYC, Linux 6.1, UCX 1.13.1, TCP bbr" (`Machine::describe`), or "unknown machine".
    pub machine: String,
    /// The commit ohb was built from (`run.commit`), or "unknown commit" for files written before
    /// ohb stamped them.
    pub commit: String,
    /// When the file was written (UTC), if stamped.
    pub written_utc: String,
    /// The command that wrote it, if stamped.
    pub command: String,
    /// The load average (1, 5, 15 minutes) when it was written, if stamped.
    pub load_average: String,
    pub charts: Vec<Chart>,
    /// Tables that are not a chart's data (the chart's data table travels with the chart).
    pub tables: Vec<Table>,
    pub targets: Vec<Target>,
}

impl Run {
    /// What tells runs apart on one page: results of different machines or commits are never
    /// shown as if they were one run.
    pub fn origin(&self) -> String {
        format!("{} @ {}", self.machine, self.commit)
    }
}

/// How x values are written on an axis and in a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XFormat {
    /// Bytes: 8 B, 4 KiB, 1 MiB.
    Size,
    /// A plain number.
    Number,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    /// (x, y), x ascending; points that failed are left out (and named in the run's targets or
    /// tables by ohb itself).
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ChartKind {
    /// Lines over a numeric x axis.
    Lines { series: Vec<Series>, x_format: XFormat, x_log: bool },
    /// One bar per category.
    Bars { bars: Vec<(String, f64)> },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Unique in a report; names the chart's files (`charts/ID.svg`, `charts/ID.png`).
    pub id: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Log scale on y (values spanning decades).
    pub y_log: bool,
    pub kind: ChartKind,
}

impl Chart {
    /// The chart's data as a table: one row per x value (or bar), one column per series.
    pub fn data_table(&self) -> Table {
        match &self.kind {
            ChartKind::Lines { series, x_format, .. } => {
                let series: Vec<&Series> = series.iter().filter(|s| !REFERENCE_LINES.contains(&s.name.as_str())).collect();
                let mut xs: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
                xs.sort_by(f64::total_cmp);
                xs.dedup();
                let mut header = vec![self.x_label.clone()];
                header.extend(series.iter().map(|s| s.name.clone()));
                let rows = xs
                    .iter()
                    .map(|&x| {
                        let mut row = vec![format_x(x, *x_format)];
                        for s in &series {
                            let y = s.points.iter().find(|p| p.0 == x).map(|p| p.1);
                            row.push(y.map(format_value).unwrap_or_else(|| "-".into()));
                        }
                        row
                    })
                    .collect();
                Table { id: format!("{}-data", self.id), title: format!("{} ({})", self.title, self.y_label), header, rows }
            }
            ChartKind::Bars { bars } => Table {
                id: format!("{}-data", self.id),
                title: format!("{} ({})", self.title, self.y_label),
                header: vec![self.x_label.clone(), self.y_label.clone()],
                rows: bars.iter().map(|(c, v)| vec![c.clone(), format_value(*v)]).collect(),
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub id: String,
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// A target of the issues with its verdict, as ohb judged it.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub name: String,
    /// PASS, FAIL, or "reported" when the target states no threshold.
    pub verdict: String,
    pub detail: String,
}

pub fn format_x(x: f64, format: XFormat) -> String {
    match format {
        XFormat::Size if x >= 1.0 && x.fract() == 0.0 => crate::args::format_size(x as usize),
        _ => format_value(x),
    }
}

/// Three significant digits, no exponent for the ranges ohb measures.
pub fn format_value(v: f64) -> String {
    let magnitude = v.abs();
    if magnitude >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if magnitude >= 10.0 {
        format!("{v:.1}")
    } else if magnitude >= 1.0 {
        format!("{v:.2}")
    } else if magnitude >= 0.001 {
        format!("{v:.3}")
    } else {
        format!("{v:.1e}")
    }
}

/// A file-name-safe id: lowercase letters, digits and dashes.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_table_has_a_row_per_x_and_a_column_per_series() {
        let chart = Chart {
            id: "c".into(),
            title: "t".into(),
            x_label: "size".into(),
            y_label: "us".into(),
            y_log: true,
            kind: ChartKind::Lines {
                series: vec![
                    Series { name: "a".into(), points: vec![(8.0, 1.5), (4096.0, 20.0)] },
                    Series { name: "b".into(), points: vec![(4096.0, 123.4)] },
                ],
                x_format: XFormat::Size,
                x_log: true,
            },
        };
        let table = chart.data_table();
        assert_eq!(table.header, ["size", "a", "b"]);
        assert_eq!(table.rows, [vec!["8 B", "1.50", "-"], vec!["4 KiB", "20.0", "123"]]);
    }

    #[test]
    fn slugs_and_values() {
        assert_eq!(slug("ohb-fabric-lat-rust.json / fabric lat"), "ohb-fabric-lat-rust-json-fabric-lat");
        assert_eq!(format_value(0.1234), "0.123");
        assert_eq!(format_value(12345.6), "12346");
        assert_eq!(format_value(0.00031), "3.1e-4");
    }
}
