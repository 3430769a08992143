//! Inline SVG line plots for the HTML report: no script, no external
//! resource, one `<svg class="plot">` per plot. Every data point is a
//! `<circle class="pt">` inside its series group (`<g class="series"
//! data-series=NAME data-points=N>`), and the plot states its total in
//! `data-points`, so a reader (or a test) can count what was drawn.

use std::fmt::Write as _;

/// Plot size in SVG user units.
const W: f64 = 640.0;
const H: f64 = 230.0;
const LEFT: f64 = 58.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 30.0;
/// Above this many points in a series, points carry no tooltip (keeps a
/// 1,000-round report small).
const TOOLTIP_LIMIT: usize = 300;

/// Series colours (colour-blind safe order).
pub const PALETTE: [&str; 6] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9",
];

/// One data point.
#[derive(Debug, Clone)]
pub struct Point {
    /// x (round index, 1-based).
    pub x: f64,
    /// y.
    pub y: f64,
    /// Tooltip text (`r03 0.2500`).
    pub label: String,
    /// Extra classes besides `pt` (`promote`, `hold`, `reverted`).
    pub class: &'static str,
}

/// One line of a plot.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// Its points, in x order.
    pub points: Vec<Point>,
    /// Join the points with a line.
    pub line: bool,
    /// A shaded interval around the line: (x, low, high) in x order
    /// (empty: none). Bands are not points: `data-points` counts circles.
    pub band: Vec<(f64, f64, f64)>,
}

/// One plot.
#[derive(Debug, Clone)]
pub struct Plot {
    /// Element id (`plot-overall`).
    pub id: String,
    /// Title above the plot.
    pub title: String,
    /// Fixed y ticks (value, label), e.g. stage names; `None`: automatic.
    pub y_ticks: Option<Vec<(f64, String)>>,
    /// The series.
    pub series: Vec<Series>,
    /// Shown instead of an empty plot area when no series has a point.
    pub empty_note: String,
}

/// Escape text for HTML/SVG content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// About five round-numbered ticks covering `[lo, hi]`.
fn nice_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(f64::EPSILON);
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| span / s <= 6.0)
        .unwrap_or(10.0 * mag);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 && out.len() < 12 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

fn tick_label(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').to_string()
    }
}

/// Render `p` as an `<svg>` element appended to `out`.
pub fn render(p: &Plot, out: &mut String) {
    render_with_x_label(p, "round", out);
}

/// [`render`] with another name for the x axis (`step`).
pub fn render_with_x_label(p: &Plot, x_label: &str, out: &mut String) {
    let total: usize = p.series.iter().map(|s| s.points.len()).sum();
    let _ = write!(
        out,
        r#"<figure><figcaption>{}</figcaption><svg id="{}" class="plot" data-points="{total}" viewBox="0 0 {W} {H}" role="img" aria-label="{}">"#,
        esc(&p.title),
        esc(&p.id),
        esc(&p.title)
    );
    let pts = p.series.iter().flat_map(|s| &s.points);
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for q in pts {
        x0 = x0.min(q.x);
        x1 = x1.max(q.x);
        y0 = y0.min(q.y);
        y1 = y1.max(q.y);
    }
    if total == 0 {
        let _ = write!(
            out,
            r#"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" class="frame"/><text x="{}" y="{}" text-anchor="middle" class="note">{}</text></svg></figure>"#,
            W - LEFT - RIGHT,
            H - TOP - BOTTOM,
            (W + LEFT - RIGHT) / 2.0,
            (H + TOP - BOTTOM) / 2.0,
            esc(&p.empty_note)
        );
        return;
    }
    for (_, lo, hi) in p.series.iter().flat_map(|s| &s.band) {
        y0 = y0.min(*lo);
        y1 = y1.max(*hi);
    }
    if let Some(t) = &p.y_ticks {
        for (v, _) in t {
            y0 = y0.min(*v);
            y1 = y1.max(*v);
        }
    }
    let pad = if y1 > y0 {
        (y1 - y0) * 0.06
    } else {
        y0.abs().max(1.0) * 0.1
    };
    let (y0, y1) = (y0 - pad, y1 + pad);
    let (x0, x1) = if x1 > x0 {
        (x0, x1)
    } else {
        (x0 - 1.0, x1 + 1.0)
    };
    let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * (W - LEFT - RIGHT);
    let sy = |y: f64| H - BOTTOM - (y - y0) / (y1 - y0) * (H - TOP - BOTTOM);
    let _ = write!(
        out,
        r#"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" class="frame"/>"#,
        W - LEFT - RIGHT,
        H - TOP - BOTTOM
    );
    let yt: Vec<(f64, String)> = match &p.y_ticks {
        Some(t) => t.clone(),
        None => nice_ticks(y0, y1)
            .into_iter()
            .map(|v| (v, tick_label(v)))
            .collect(),
    };
    for (v, l) in &yt {
        let y = sy(*v);
        let _ = write!(
            out,
            r#"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" class="grid"/><text x="{}" y="{:.1}" text-anchor="end" class="tick">{}</text>"#,
            W - RIGHT,
            LEFT - 4.0,
            y + 3.5,
            esc(l)
        );
    }
    for v in nice_ticks(x0, x1).into_iter().filter(|v| v.fract() == 0.0) {
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{}" text-anchor="middle" class="tick">{}</text>"#,
            sx(v),
            H - BOTTOM + 14.0,
            tick_label(v)
        );
    }
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" text-anchor="end" class="tick">{}</text>"#,
        W - RIGHT,
        H - 3.0,
        esc(x_label)
    );
    let mut legend_x = LEFT;
    for (i, s) in p.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let _ = write!(
            out,
            r#"<g class="series" data-series="{}" data-points="{}" stroke="{color}" fill="{color}">"#,
            esc(&s.name),
            s.points.len()
        );
        if s.band.len() > 1 {
            out.push_str(r#"<polygon class="band" stroke="none" fill-opacity="0.18" points=""#);
            for (x, _, hi) in &s.band {
                let _ = write!(out, "{:.1},{:.1} ", sx(*x), sy(*hi));
            }
            for (x, lo, _) in s.band.iter().rev() {
                let _ = write!(out, "{:.1},{:.1} ", sx(*x), sy(*lo));
            }
            out.push_str(r#""/>"#);
        }
        if s.line && s.points.len() > 1 {
            out.push_str(r#"<polyline fill="none" points=""#);
            for q in &s.points {
                let _ = write!(out, "{:.1},{:.1} ", sx(q.x), sy(q.y));
            }
            out.push_str(r#""/>"#);
        }
        let tips = s.points.len() <= TOOLTIP_LIMIT;
        for q in &s.points {
            let cls = if q.class.is_empty() {
                "pt".to_string()
            } else {
                format!("pt {}", q.class)
            };
            let _ = write!(
                out,
                r#"<circle class="{cls}" cx="{:.1}" cy="{:.1}" r="2.6""#,
                sx(q.x),
                sy(q.y)
            );
            if tips {
                let _ = write!(out, "><title>{}</title></circle>", esc(&q.label));
            } else {
                out.push_str("/>");
            }
        }
        out.push_str("</g>");
        let _ = write!(
            out,
            r#"<rect x="{legend_x:.1}" y="8" width="10" height="10" fill="{color}"/><text x="{:.1}" y="17" class="legend">{}</text>"#,
            legend_x + 14.0,
            esc(&s.name)
        );
        legend_x += 24.0 + 6.5 * s.name.chars().count() as f64;
    }
    out.push_str("</svg></figure>");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(x: f64, y: f64) -> Point {
        Point {
            x,
            y,
            label: format!("r{x}"),
            class: "",
        }
    }

    #[test]
    fn a_plot_draws_one_circle_per_point_and_states_the_count() {
        let p = Plot {
            id: "plot-x".into(),
            title: "X <y>".into(),
            y_ticks: None,
            series: vec![
                Series {
                    name: "main".into(),
                    points: vec![pt(1.0, 0.2), pt(2.0, 0.3), pt(3.0, 0.25)],
                    line: true,
                    band: vec![(1.0, 0.1, 0.3), (2.0, 0.2, 0.4), (3.0, 0.2, 0.3)],
                },
                Series {
                    name: "replay/x".into(),
                    points: vec![pt(1.0, 0.1)],
                    line: true,
                    band: Vec::new(),
                },
            ],
            empty_note: String::new(),
        };
        let mut s = String::new();
        render(&p, &mut s);
        assert_eq!(s.matches(r#"<circle class="pt""#).count(), 4);
        assert_eq!(s.matches(r#"<polygon class="band""#).count(), 1);
        assert!(s.contains(r#"id="plot-x" class="plot" data-points="4""#));
        assert!(s.contains(r#"data-series="replay/x" data-points="1""#));
        assert!(s.contains("X &lt;y&gt;"));
        assert!(!s.contains("http"));
    }

    #[test]
    fn an_empty_plot_says_why() {
        let p = Plot {
            id: "plot-e".into(),
            title: "E".into(),
            y_ticks: None,
            series: vec![],
            empty_note: "no audits".into(),
        };
        let mut s = String::new();
        render(&p, &mut s);
        assert!(s.contains(r#"data-points="0""#) && s.contains("no audits"));
    }

    #[test]
    fn ticks_are_round_numbers_inside_the_range() {
        let t = nice_ticks(0.13, 0.42);
        assert!(t.len() >= 3 && t.len() <= 7, "{t:?}");
        assert!(t.iter().all(|v| (0.13..=0.42).contains(v)));
        assert_eq!(tick_label(0.25), "0.25");
        assert_eq!(tick_label(1_200_000.0), "1.2M");
    }
}
