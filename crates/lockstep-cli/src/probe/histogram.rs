//! The PNG histogram: how long after A's commit B returned the value, with
//! fresh rounds (first read already saw it) and stale rounds side by side
//! in each bin. The count axis is logarithmic: stale rounds are typically
//! 1-2 % and would be invisible beside the fresh ones on a linear axis.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use plotters::prelude::*;
use plotters::style::FontStyle;

use super::report::Report;
use super::rounds::Sample;
use super::ProbeError;

/// Fonts tried in order (Debian's fonts-dejavu-core first).
const FONTS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];
const BINS: usize = 50;
const SIZE: (u32, u32) = (1000, 600);

/// Counts per bin: `(fresh, stale)`; the last bin also holds everything
/// beyond the range.
#[derive(Debug, Clone, PartialEq)]
pub struct Bins {
    pub width_ms: f64,
    pub counts: Vec<(u32, u32)>,
    /// Rounds beyond the plotted range (counted in the last bin).
    pub overflow: usize,
}

/// Bins the samples over `[0, upper)`, upper = 1.2 × the 99.5th percentile.
pub fn bin(samples: &[Sample]) -> Bins {
    let mut v: Vec<Duration> = samples.iter().map(|s| s.visible).collect();
    v.sort_unstable();
    let upper_ms = v
        .get((v.len() * 995 / 1000).min(v.len().saturating_sub(1)))
        .map_or(1.0, |d| d.as_secs_f64() * 1000.0 * 1.2)
        .max(0.01);
    let width_ms = upper_ms / BINS as f64;
    let mut counts = vec![(0u32, 0u32); BINS];
    let mut overflow = 0;
    for s in samples {
        let ms = s.visible.as_secs_f64() * 1000.0;
        let mut i = (ms / width_ms) as usize;
        if i >= BINS {
            overflow += 1;
            i = BINS - 1;
        }
        if s.is_stale() {
            counts[i].1 += 1;
        } else {
            counts[i].0 += 1;
        }
    }
    Bins {
        width_ms,
        counts,
        overflow,
    }
}

/// Writes the histogram of `report` to `path`.
pub fn write_png(path: &Path, report: &Report) -> Result<(), ProbeError> {
    let png_err = |message: String| ProbeError::Png {
        path: path.to_path_buf(),
        message,
    };
    register_font().map_err(png_err)?;
    draw(path, report).map_err(png_err)
}

pub(crate) fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let bytes = FONTS
                .iter()
                .find_map(|p| std::fs::read(p).ok())
                .ok_or_else(|| {
                    format!(
                        "no TrueType font found (tried {}); install fonts-dejavu-core",
                        FONTS.join(", ")
                    )
                })?;
            // plotters keeps fonts for the life of the process; leaking the
            // one font we load, once, is exactly that.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| "the font file is not a valid TrueType font".to_string())
        })
        .clone()
}

fn draw(path: &Path, report: &Report) -> Result<(), String> {
    let bins = bin(&report.samples);
    let max = bins
        .counts
        .iter()
        .map(|(f, s)| (*f).max(*s))
        .max()
        .unwrap_or(1)
        .max(1);
    let upper = bins.width_ms * BINS as f64;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let title = format!(
        "{} -> {}: {} of {} rounds stale ({:.2} %), wsrep_sync_wait={}, {} load thread(s)",
        short(&report.writer),
        short(&report.reader),
        report.stale_rounds,
        report.rounds,
        report.stale_percent,
        report.sync_wait,
        report.load_threads
    );
    // Bars start just under 1 so a count of 1 is visible on the log axis.
    let floor = 0.8f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..upper, (floor..f64::from(max) * 2.0).log_scale())
        .map_err(|e| e.to_string())?;
    let x_desc = if bins.overflow > 0 {
        format!(
            "commit on A -> value read on B (ms); last bin includes {} slower round(s)",
            bins.overflow
        )
    } else {
        "commit on A -> value read on B (ms)".to_string()
    };
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("rounds (log scale)")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(|e| e.to_string())?;
    let w = bins.width_ms;
    let fresh = RGBColor(52, 101, 164);
    let stale = RGBColor(204, 0, 0);
    chart
        .draw_series(
            bins.counts
                .iter()
                .enumerate()
                .filter(|(_, c)| c.0 > 0)
                .map(|(i, c)| {
                    let x0 = i as f64 * w;
                    Rectangle::new(
                        [(x0, floor), (x0 + w * 0.5, f64::from(c.0))],
                        fresh.filled(),
                    )
                }),
        )
        .map_err(|e| e.to_string())?
        .label("fresh: first read saw the value")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], fresh.filled()));
    chart
        .draw_series(
            bins.counts
                .iter()
                .enumerate()
                .filter(|(_, c)| c.1 > 0)
                .map(|(i, c)| {
                    let x0 = i as f64 * w + w * 0.5;
                    Rectangle::new(
                        [(x0, floor), (x0 + w * 0.5, f64::from(c.1))],
                        stale.filled(),
                    )
                }),
        )
        .map_err(|e| e.to_string())?
        .label("stale: read again until visible")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], stale.filled()));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

/// `node1` of `node1 (127.0.0.1:3306)`: the title has room for names only.
fn short(label: &str) -> &str {
    label.split(" (").next().unwrap_or(label)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(visible_us: u64, stale_reads: u32) -> Sample {
        Sample {
            write: Duration::from_micros(500),
            visible: Duration::from_micros(visible_us),
            stale_reads,
            seen: true,
        }
    }

    #[test]
    fn every_round_lands_in_a_bin_and_outliers_in_the_last() {
        let mut samples: Vec<Sample> = (0..1000).map(|i| s(100 + i, 0)).collect();
        samples.push(s(50_000, 4));
        let b = bin(&samples);
        let total: u32 = b.counts.iter().map(|(f, s)| f + s).sum();
        assert_eq!(total, 1001);
        assert_eq!(b.overflow, 1);
        assert_eq!(
            b.counts[BINS - 1].1,
            1,
            "the stale outlier is in the last bin"
        );
        assert!(b.width_ms > 0.0);
    }

    #[test]
    fn an_empty_run_still_bins() {
        let b = bin(&[]);
        assert_eq!(b.counts.len(), BINS);
        assert_eq!(b.overflow, 0);
    }
}
