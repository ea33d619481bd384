//! Charts drawn with `plotters`, as SVG and PNG, from a [`Chart`].
//!
//! Log axes are drawn as linear axes over log values (log2 of sizes, log10 of values) whose labels
//! show the values again: one coordinate type for every chart. The baseline series (the default a
//! variant replaces, see [`BASELINE_SERIES`]) is grey in every chart; other series get a colour from
//! their name, so `fabric` is the same blue everywhere.
//!
//! PNG text needs a TrueType font: `OHB_REPORT_FONT`, else DejaVu Sans from Debian's
//! fonts-dejavu-core (the Makefile installs it); a missing font is an error that says so.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::report::model::{format_value, format_x, Chart, ChartKind, Series, BASELINE_SERIES};

pub const WIDTH_PX: u32 = 860;
pub const HEIGHT_PX: u32 = 480;
pub const FONT_DEFAULT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
/// A font file larger than this is refused (fonts are a few hundred KiB).
pub const FONT_BYTES_MAX: u64 = 32 << 20;

const BASELINE_COLOR: RGBColor = RGBColor(110, 110, 110);
/// Colours of named series, so a variant looks the same in every chart.
const NAMED_COLORS: &[(&str, RGBColor)] = &[
    ("fabric", RGBColor(31, 119, 180)),
    ("cache-fabric", RGBColor(31, 119, 180)),
    ("plugin", RGBColor(31, 119, 180)),
    ("fabric-tcp", RGBColor(255, 127, 14)),
    ("cache-tcp", RGBColor(255, 127, 14)),
    ("plugin-tcp", RGBColor(255, 127, 14)),
    ("ucx_perftest", RGBColor(44, 160, 44)),
    ("cache-hybrid", RGBColor(148, 103, 189)),
    ("memcached-ext", RGBColor(140, 86, 75)),
    ("cache-ram", RGBColor(23, 190, 207)),
];
const OTHER_COLORS: &[RGBColor] = &[
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
];

pub fn color_of(name: &str, index: usize) -> RGBColor {
    if BASELINE_SERIES.contains(&name) {
        return BASELINE_COLOR;
    }
    NAMED_COLORS.iter().find(|(n, _)| *n == name).map(|(_, c)| *c).unwrap_or(OTHER_COLORS[index % OTHER_COLORS.len()])
}

/// Registers the font once per process (plotters keeps it for the process's life).
pub fn load_font() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let path = std::env::var_os("OHB_REPORT_FONT").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(FONT_DEFAULT));
            let size = std::fs::metadata(&path)
                .map_err(|e| format!("font {}: {e} (install fonts-dejavu-core, or set OHB_REPORT_FONT to a .ttf)", path.display()))?
                .len();
            if size > FONT_BYTES_MAX {
                return Err(format!("font {}: {size} bytes, more than {FONT_BYTES_MAX}", path.display()));
            }
            let bytes = std::fs::read(&path).map_err(|e| format!("font {}: {e}", path.display()))?;
            // Leaked once per process: plotters wants the font for the rest of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| format!("font {}: not a TrueType font", path.display()))
        })
        .clone()
}

/// Writes `DIR/ID.svg` and `DIR/ID.png`; returns the SVG's text (the page inlines it).
pub fn render_files(chart: &Chart, dir: &Path) -> Result<String, String> {
    load_font()?;
    let svg_path = dir.join(format!("{}.svg", chart.id));
    let png_path = dir.join(format!("{}.png", chart.id));
    {
        let root = SVGBackend::new(&svg_path, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
        draw(&root, chart).map_err(|e| format!("{}: {e}", svg_path.display()))?;
        root.present().map_err(|e| format!("{}: {e}", svg_path.display()))?;
    }
    {
        let root = BitMapBackend::new(&png_path, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
        draw(&root, chart).map_err(|e| format!("{}: {e}", png_path.display()))?;
        root.present().map_err(|e| format!("{}: {e}", png_path.display()))?;
    }
    std::fs::read_to_string(&svg_path).map_err(|e| format!("{}: {e}", svg_path.display()))
}

/// The axis range of values, padded; in log10 when `log` (non-positive values are left out).
fn range(values: impl Iterator<Item = f64>, log: bool, from_zero: bool) -> (f64, f64) {
    let values: Vec<f64> = values.filter(|v| v.is_finite() && (!log || *v > 0.0)).map(|v| if log { v.log10() } else { v }).collect();
    let (mut lo, mut hi) = values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if from_zero && !log {
        lo = lo.min(0.0);
    }
    if hi - lo < 1e-9 {
        hi += 0.5;
        lo -= if from_zero && lo == 0.0 { 0.0 } else { 0.5 };
    }
    let pad = (hi - lo) * 0.06;
    (if from_zero && !log && lo == 0.0 { 0.0 } else { lo - pad }, hi + pad)
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: &Chart) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let y_log = chart.y_log;
    let y_value = move |v: f64| if y_log { 10f64.powf(v) } else { v };
    match &chart.kind {
        ChartKind::Lines { series, x_format, x_log } => {
            let x_log = *x_log;
            let tx = move |x: f64| if x_log { x.log2() } else { x };
            let (x0, x1) = {
                let xs: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).filter(|x| !x_log || *x > 0.0).collect();
                let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                if lo.is_finite() && hi > lo { (tx(lo) - (tx(hi) - tx(lo)) * 0.03, tx(hi) + (tx(hi) - tx(lo)) * 0.03) } else { (0.0, 1.0) }
            };
            let (y0, y1) = range(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)), y_log, !y_log);
            let x_format = *x_format;
            let mut ctx = ChartBuilder::on(root)
                .caption(&chart.title, ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(42)
                .y_label_area_size(70)
                .build_cartesian_2d(x0..x1, y0..y1)
                .map_err(e)?;
            ctx.configure_mesh()
                .x_desc(&chart.x_label)
                .y_desc(&chart.y_label)
                .x_label_formatter(&|v| format_x(if x_log { 2f64.powf(v.round()) } else { *v }, x_format))
                .x_labels(if x_log { ((x1 - x0).ceil() as usize + 1).min(14) } else { 10 })
                .y_label_formatter(&|v| format_value(y_value(*v)))
                .label_style(("sans-serif", 12))
                .draw()
                .map_err(e)?;
            for (index, s) in series.iter().enumerate() {
                draw_series(&mut ctx, s, index, &tx, y_log).map_err(e)?;
            }
            ctx.configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.4))
                .label_font(("sans-serif", 12))
                .draw()
                .map_err(e)?;
        }
        ChartKind::Bars { bars } => {
            let n = bars.len().max(1) as f64;
            let (_, y1) = range(bars.iter().map(|b| b.1), false, true);
            let mut ctx = ChartBuilder::on(root)
                .caption(&chart.title, ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(42)
                .y_label_area_size(70)
                .build_cartesian_2d(-0.5..n - 0.5, 0.0..y1)
                .map_err(e)?;
            let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
            ctx.configure_mesh()
                .disable_x_mesh()
                .x_desc(&chart.x_label)
                .y_desc(&chart.y_label)
                .x_labels(bars.len() * 2 + 1)
                .x_label_formatter(&|v| {
                    let i = v.round();
                    if (v - i).abs() < 0.05 && i >= 0.0 { names.get(i as usize).cloned().unwrap_or_default() } else { String::new() }
                })
                .y_label_formatter(&|v| format_value(*v))
                .label_style(("sans-serif", 12))
                .draw()
                .map_err(e)?;
            ctx.draw_series(bars.iter().enumerate().map(|(i, (name, value))| {
                let x = i as f64;
                Rectangle::new([(x - 0.32, 0.0), (x + 0.32, *value)], color_of(name, i).filled())
            }))
            .map_err(e)?;
        }
    }
    Ok(())
}

fn draw_series<DB: DrawingBackend>(
    ctx: &mut ChartContext<DB, Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>>,
    s: &Series,
    index: usize,
    tx: &dyn Fn(f64) -> f64,
    y_log: bool,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB::ErrorType: 'static,
{
    let color = color_of(&s.name, index);
    let points: Vec<(f64, f64)> =
        s.points.iter().filter(|p| !y_log || p.1 > 0.0).map(|&(x, y)| (tx(x), if y_log { y.log10() } else { y })).collect();
    let width = if BASELINE_SERIES.contains(&s.name.as_str()) { 3 } else { 2 };
    ctx.draw_series(LineSeries::new(points.clone(), color.stroke_width(width)))?
        .label(s.name.clone())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(width)));
    ctx.draw_series(points.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
    Ok(())
}
