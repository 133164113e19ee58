//! The report's PNGs: throughput over time and latency percentiles, every
//! provider on the same chart. Fonts as for the probe's histogram.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::probe::histogram::register_font;

const SIZE: (u32, u32) = (1000, 520);
/// One color per provider, in run order (Lockstep blue, Galera orange).
const COLORS: [RGBColor; 4] = [
    RGBColor(52, 101, 164),
    RGBColor(245, 121, 0),
    RGBColor(78, 154, 6),
    RGBColor(117, 80, 123),
];

/// One provider's line or bars.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    /// (x, y): (second, tps) or (percentile index, ms).
    pub points: Vec<(f64, f64)>,
}

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

type Canvas<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

/// A white PNG canvas, fonts loaded.
fn canvas(path: &Path) -> Result<Canvas<'_>, String> {
    register_font()?;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    Ok(root)
}

/// Title, margins and axis label room, the same on every chart.
fn frame<'a, 'b>(root: &'a Canvas<'b>, title: &str) -> ChartBuilder<'a, 'b, BitMapBackend<'b>> {
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65);
    builder
}

/// Transactions per second over the measured run, one line per provider.
pub fn throughput(path: &Path, title: &str, series: &[Series]) -> Result<(), String> {
    lines(
        path,
        title,
        "seconds since the start of the measured run",
        "transactions per second",
        series,
        false,
    )
}

/// `y_desc` by cluster size (`lockstep bench --nodes`), one line per
/// provider.
pub fn by_nodes(path: &Path, title: &str, y_desc: &str, series: &[Series]) -> Result<(), String> {
    lines(path, title, "nodes in the cluster", y_desc, series, false)
}

/// Transactions per second by client threads (the thread sweep), one line
/// per provider.
/// Thread counts go on a log2 axis (1, 8, 32, 128 spread evenly).
pub fn sweep(path: &Path, title: &str, series: &[Series]) -> Result<(), String> {
    let logged: Vec<Series> = series
        .iter()
        .map(|s| Series {
            label: s.label.clone(),
            points: s
                .points
                .iter()
                .map(|&(x, y)| (x.max(1.0).log2(), y))
                .collect(),
        })
        .collect();
    lines(
        path,
        title,
        "client threads (log scale)",
        "transactions per second",
        &logged,
        true,
    )
}

/// Lines of `y_desc` over `x_desc`, one per provider; with `log2_x` the x
/// values are exponents of 2 and labelled as powers.
fn lines(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    log2_x: bool,
) -> Result<(), String> {
    let all = || series.iter().flat_map(|s| s.points.iter());
    let x_max = all().map(|p| p.0).fold(1.0, f64::max);
    // Headroom above the highest point for the legend.
    let y_max = all().map(|p| p.1).fold(1.0, f64::max) * 1.3;
    let root = canvas(path)?;
    let mut chart = frame(&root, title)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|x| {
            if log2_x {
                format!("{:.0}", x.exp2())
            } else {
                format!("{x:.0}")
            }
        })
        .y_label_formatter(&|y| {
            if y_max < 20.0 {
                format!("{y:.1}")
            } else {
                format!("{y:.0}")
            }
        })
        .draw()
        .map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(std::iter::once(PathElement::new(
                s.points.clone(),
                c.stroke_width(2),
            )))
            .map_err(err)?
            .label(&s.label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, c.filled())))
            .map_err(err)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present().map_err(err)
}

/// Latency percentiles as grouped bars on a log axis: one group per
/// percentile (`names`), one bar per provider, each labelled with its value.
pub fn latency(path: &Path, title: &str, names: &[&str], series: &[Series]) -> Result<(), String> {
    let values = || series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let lo = values().fold(f64::INFINITY, f64::min);
    let hi = values().fold(0.0, f64::max);
    let (lo, hi) = if lo.is_finite() && lo > 0.0 {
        (lo / 2.0, hi * 3.0)
    } else {
        (0.1, 10.0)
    };
    let groups = names.len().max(1) as f64;
    let root = canvas(path)?;
    let mut chart = frame(&root, title)
        .build_cartesian_2d(-0.5f64..groups - 0.5, (lo..hi).log_scale())
        .map_err(err)?;
    let label_of = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            names
                .get(i as usize)
                .copied()
                .unwrap_or_default()
                .to_string()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(names.len() * 2 + 1)
        .x_label_formatter(&label_of)
        .x_desc("percentile of transaction latency")
        .y_desc("ms (log scale)")
        .y_label_formatter(&|y| format!("{y}"))
        .draw()
        .map_err(err)?;
    let width = 0.8 / series.len().max(1) as f64;
    for (i, s) in series.iter().enumerate() {
        let c = color(i);
        let left = |x: f64| x - 0.4 + width * i as f64;
        let above = ("sans-serif", 13)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Bottom));
        chart
            .draw_series(s.points.iter().map(|&(x, y)| {
                Rectangle::new([(left(x), lo), (left(x) + width * 0.92, y)], c.filled())
            }))
            .map_err(err)?
            .label(&s.label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        chart
            .draw_series(s.points.iter().map(|&(x, y)| {
                Text::new(short(y), (left(x) + width * 0.46, y * 1.02), above.clone())
            }))
            .map_err(err)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present().map_err(err)
}

/// 0.123, 1.23, 12.3, 123
fn short(ms: f64) -> String {
    match ms {
        v if v < 1.0 => format!("{v:.3}"),
        v if v < 10.0 => format!("{v:.2}"),
        v if v < 100.0 => format!("{v:.1}"),
        v => format!("{v:.0}"),
    }
}

fn legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    at: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_labels_keep_three_significant_digits() {
        assert_eq!(short(0.4567), "0.457");
        assert_eq!(short(4.567), "4.57");
        assert_eq!(short(45.67), "45.7");
        assert_eq!(short(4567.0), "4567");
    }

    #[test]
    fn both_charts_draw_with_and_without_data() {
        let dir = tempfile::tempdir().unwrap();
        let s = |label: &str, k: f64| Series {
            label: label.into(),
            points: (0..5)
                .map(|i| (f64::from(i), k * f64::from(i + 1)))
                .collect(),
        };
        let series = [s("lockstep", 100.0), s("galera", 80.0)];
        for data in [&series[..], &[]] {
            let t = dir.path().join("t.png");
            throughput(&t, "t", data).unwrap();
            let l = dir.path().join("l.png");
            latency(&l, "l", &["p50", "p75", "p90", "p95", "max"], data).unwrap();
            assert!(std::fs::metadata(&t).unwrap().len() > 1000);
            assert!(std::fs::metadata(&l).unwrap().len() > 1000);
        }
    }
}
