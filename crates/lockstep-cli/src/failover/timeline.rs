//! One fault's timeline as a PNG: a row per client, each statement a short
//! bar from when it was sent to when it ended, coloured by the node that
//! answered (red: failed), and the harness's and balancer's events as
//! numbered vertical lines, listed under the chart.

use std::collections::HashMap;
use std::path::Path;

use plotters::prelude::*;

use super::events::Event;
use super::measure::{Answer, Outcome, Statement};
use crate::probe::histogram::register_font;

const SIZE: (u32, u32) = (1100, 560);
const NODE_COLORS: [RGBColor; 4] = [
    RGBColor(52, 101, 164),
    RGBColor(78, 154, 6),
    RGBColor(117, 80, 123),
    RGBColor(193, 125, 17),
];
const FAILED: RGBColor = RGBColor(204, 0, 0);

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn node_color(node: &str) -> RGBColor {
    let n: usize = node
        .trim_start_matches("node")
        .parse()
        .unwrap_or(1usize)
        .max(1);
    NODE_COLORS[(n - 1) % NODE_COLORS.len()]
}

/// Draws `statements` (already limited to the window starting at
/// `from_us`) with `events` into `path`.
pub fn draw(
    path: &Path,
    title: &str,
    statements: &[Statement],
    answers: &HashMap<u64, Answer>,
    from_us: u64,
    events: &[Event],
) -> Result<(), String> {
    register_font()?;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (chart_area, legend_area) = root.split_vertically(SIZE.1 - 110);
    let secs = |us: u64| us.saturating_sub(from_us) as f64 / 1e6;
    let x_max = statements
        .iter()
        .map(|s| secs(s.end_us))
        .fold(1.0f64, f64::max)
        .max(
            events
                .iter()
                .map(|e| (e.at_ms * 1000).saturating_sub(from_us) as f64 / 1e6)
                .fold(0.0, f64::max),
        )
        + 0.5;
    let clients = statements.iter().map(|s| s.client).max().unwrap_or(0) + 1;
    let mut chart = ChartBuilder::on(&chart_area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..x_max, -0.5f64..(clients as f64 - 0.5))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the fault")
        .y_desc("client")
        .y_labels(clients as usize)
        .y_label_formatter(&|y| format!("{}", y.round() as i64))
        .disable_y_mesh()
        .light_line_style(WHITE)
        .draw()
        .map_err(err)?;
    chart
        .draw_series(statements.iter().map(|s| {
            let color = match (&s.outcome, answers.get(&s.id)) {
                (Outcome::Ok, Some(a)) => node_color(&a.node),
                (Outcome::Ok, None) => RGBColor(120, 120, 120),
                _ => FAILED,
            };
            let y = f64::from(s.client);
            let (h, x1) = if s.outcome == Outcome::Ok {
                (0.18, secs(s.end_us))
            } else {
                (0.38, secs(s.end_us).max(secs(s.start_us) + 0.03))
            };
            Rectangle::new([(secs(s.start_us), y - h), (x1, y + h)], color.filled())
        }))
        .map_err(err)?;
    for (i, e) in events.iter().enumerate() {
        let x = (e.at_ms * 1000).saturating_sub(from_us) as f64 / 1e6;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x, -0.5), (x, clients as f64 - 0.5)],
                BLACK.mix(0.35),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                format!("{}", i + 1),
                (x, clients as f64 - 0.55),
                ("sans-serif", 13).into_font(),
            )))
            .map_err(err)?;
    }
    let mut lines: Vec<String> = events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let x = (e.at_ms * 1000).saturating_sub(from_us) as f64 / 1e6;
            format!("{} {:.1}s {}: {}", i + 1, x, e.source, short(&e.what))
        })
        .collect();
    lines.insert(
        0,
        "bars: blue node1, green node2, purple node3, brown node4; red: failed".into(),
    );
    // Room for 7 lines in each of 2 columns under the chart.
    let per_col = 7;
    lines.truncate(per_col * 2);
    for (i, l) in lines.iter().enumerate() {
        let col = (i / per_col) as i32;
        let row = (i % per_col) as i32;
        legend_area
            .draw(&Text::new(
                l.clone(),
                (20 + col * 540, 4 + row * 14),
                ("sans-serif", 12).into_font(),
            ))
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

fn short(s: &str) -> String {
    let s = s.split(", check duration").next().unwrap_or(s);
    if s.chars().count() > 80 {
        s.chars().take(77).collect::<String>() + "..."
    } else {
        s.to_string()
    }
}
