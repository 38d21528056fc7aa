//! Charts for `tidemark-lab reproduce --out` and `bench-report`: records drawn as line
//! charts, in SVG and PNG, with an embedded font (no system font libraries are linked).
//!
//! A [`Chart`] names the record fields to draw: one x field, one or more y fields, an
//! optional field to split the rows into series, an optional (low, high) pair drawn as error
//! bars on the first y field, and logarithmic axes where the data spans decades. Log axes are
//! drawn by plotting `log10` of the values on a linear axis and labelling ticks `10^k`, so one
//! code path serves both.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use plotters::prelude::*;
use serde_json::Value;

use tidemark_cli::output::Record;

/// The embedded font: DejaVu Sans (see assets/DejaVuSans-LICENSE.txt).
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// How to draw one chart of a plate.
#[derive(Clone, Copy, Debug)]
pub struct Chart {
    /// Appended to the plate's name for the file (`""` for the plate's main chart).
    pub suffix: &'static str,
    /// The title.
    pub title: &'static str,
    /// The x field.
    pub x: &'static str,
    /// The y fields, one series each (per group).
    pub ys: &'static [&'static str],
    /// Rows are split into series by this field's value.
    pub group: Option<&'static str>,
    /// Fields drawn as an error bar around the first y field.
    pub band: Option<(&'static str, &'static str)>,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The y axis label.
    pub y_label: &'static str,
    /// Only rows whose fields have these values (`""`: only rows that have the field), for
    /// plates that print several tables.
    pub only: &'static [(&'static str, &'static str)],
    /// Points without joining lines (for cases that are categories, not a scale).
    pub points_only: bool,
}

/// A number from a record field: JSON numbers, and numeric strings (some plates format
/// their figures).
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim_end_matches('%').parse().ok(),
        Value::Bool(b) => Some(*b as u8 as f64),
        _ => None,
    }
}

fn label(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One drawn series: its name and points (already on the log scale where asked).
struct Series {
    name: String,
    points: Vec<(f64, f64)>,
    bars: Vec<(f64, f64, f64)>,
}

fn scale(v: f64, log: bool) -> Option<f64> {
    if !v.is_finite() {
        return None;
    }
    if log {
        (v > 0.0).then(|| v.log10())
    } else {
        Some(v)
    }
}

fn series(chart: &Chart, records: &[Record]) -> Vec<Series> {
    let mut groups: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let wanted = |r: &Record| {
        chart.only.iter().all(|&(field, value)| match r.get(field) {
            None => false,
            Some(v) => value.is_empty() || label(v) == value,
        })
    };
    for r in records.iter().filter(|r| wanted(r)) {
        let key = chart
            .group
            .and_then(|g| r.get(g))
            .map(label)
            .unwrap_or_default();
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(r);
    }
    let mut out = Vec::new();
    for key in order {
        let rows = &groups[&key];
        for (i, y) in chart.ys.iter().enumerate() {
            let mut s = Series {
                name: match chart.group {
                    Some(g) => format!("{y} ({g} {key})"),
                    None => y.to_string(),
                },
                points: Vec::new(),
                bars: Vec::new(),
            };
            for r in rows {
                let (Some(x), Some(yv)) =
                    (r.get(chart.x).and_then(number), r.get(y).and_then(number))
                else {
                    continue;
                };
                let (Some(x), Some(yv)) = (scale(x, chart.log_x), scale(yv, chart.log_y)) else {
                    continue;
                };
                s.points.push((x, yv));
                if let (0, Some((lo, hi))) = (i, chart.band) {
                    let lo = r
                        .get(lo)
                        .and_then(number)
                        .and_then(|v| scale(v, chart.log_y));
                    let hi = r
                        .get(hi)
                        .and_then(number)
                        .and_then(|v| scale(v, chart.log_y));
                    if let (Some(lo), Some(hi)) = (lo, hi) {
                        s.bars.push((x, lo, hi));
                    }
                }
            }
            if !s.points.is_empty() {
                out.push(s);
            }
        }
    }
    out
}

fn tick(v: f64, log: bool) -> String {
    if log {
        let p = 10f64.powf(v);
        if (v - v.round()).abs() < 1e-9 && (0..=6).contains(&(v.round() as i32)) {
            return format!("{}", p.round() as u64);
        }
        return short(p);
    }
    short(v)
}

/// A number in a few significant digits: `0.00032` as `3.2e-4`, `45000` as `45000`.
fn short(v: f64) -> String {
    if v.abs() >= 1e6 || (v != 0.0 && v.abs() < 1e-2) {
        format!("{v:.1e}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    chart: &Chart,
    data: &[Series],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let all = data.iter().flat_map(|s| {
        s.points
            .iter()
            .copied()
            .chain(s.bars.iter().flat_map(|&(x, lo, hi)| [(x, lo), (x, hi)]))
    });
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    let pad = |a: f64, b: f64| if b > a { (b - a) * 0.05 } else { 0.5 };
    let (px, py) = (pad(x0, x1), pad(y0, y1));
    let mut c = ChartBuilder::on(&root)
        .caption(chart.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(70)
        .build_cartesian_2d((x0 - px)..(x1 + px), (y0 - py)..(y1 + py))
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    c.configure_mesh()
        .x_desc(chart.x)
        .y_desc(chart.y_label)
        .x_label_formatter(&|v| tick(*v, chart.log_x))
        .y_label_formatter(&|v| tick(*v, chart.log_y))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    for (i, s) in data.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let line = if chart.points_only {
            Vec::new()
        } else {
            s.points.clone()
        };
        c.draw_series(LineSeries::new(line, color.stroke_width(2)))
            .map_err(|e| anyhow::anyhow!("{e:?}"))?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        let radius = if chart.points_only { 5 } else { 3 };
        c.draw_series(
            s.points
                .iter()
                .map(|&p| Circle::new(p, radius, color.filled())),
        )
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        c.draw_series(
            s.bars.iter().map(|&(x, lo, hi)| {
                PathElement::new(vec![(x, lo), (x, hi)], color.stroke_width(1))
            }),
        )
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    root.present().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    Ok(())
}

/// Draws `chart` from `records` into `<stem>.svg` and `<stem>.png`.
pub fn render(chart: &Chart, records: &[Record], stem: &Path) -> anyhow::Result<()> {
    register();
    let data = series(chart, records);
    let svg = stem.with_extension("svg");
    draw(
        SVGBackend::new(&svg, (1000, 640)).into_drawing_area(),
        chart,
        &data,
    )
    .with_context(|| format!("drawing {}", svg.display()))?;
    let png = stem.with_extension("png");
    draw(
        BitMapBackend::new(&png, (1000, 640)).into_drawing_area(),
        chart,
        &data,
    )
    .with_context(|| format!("drawing {}", png.display()))?;
    Ok(())
}

fn register() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The font is ours and valid; a failure here is a broken build, not bad input.
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
            .map_err(|_| ())
            .expect("the embedded font parses");
    });
}
