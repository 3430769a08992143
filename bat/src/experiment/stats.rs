//! Estimators for comparing arms with few runs, after rliable (Agarwal et
//! al., 2021, "Deep RL at the Edge of the Statistical Precipice"): the
//! mean, the interquartile mean, stratified bootstrap confidence
//! intervals, and the probability of improvement. Pure functions on
//! numbers; nothing here reads the ledger.
//!
//! # Data
//! An arm's scores for one quantity (Overall, S3, one track, …) form a
//! [`ScoreMatrix`]: a list of *strata*, one per (track, task), each holding
//! that task's *runs* — every recorded score of the task across the arm's
//! seeds and evaluation repeats. Several quantities of one arm share one
//! shape (the same strata with the same run counts, cell by cell), which
//! lets them be resampled jointly.
//!
//! # Point estimates
//! - **mean**: the plain mean of every score in the matrix (all runs of all
//!   strata). With the same number of runs per stratum this is the mean of
//!   the per-task means, and it is what the evaluation summary's headline
//!   numbers are for a single seed.
//! - **IQM**: the 25% trimmed mean of all scores pooled: sort the `N`
//!   scores, drop the lowest and the highest `floor(N/4)`, average the rest
//!   (the definition of `scipy.stats.trim_mean(x, 0.25)` that rliable uses;
//!   with fewer than 4 scores nothing is dropped).
//! - **P(A > B)**, the probability of improvement: for each stratum both arms
//!   have, the share of (run of A, run of B) pairs where A's score is
//!   higher, a tie counting one half (the Mann–Whitney U statistic divided by
//!   `n_A × n_B`); then the plain average over those strata. By construction
//!   `P(A > B) + P(B > A) = 1`.
//!
//! # Bootstrap
//! A resample redraws, for every stratum independently, in two levels: as
//! many seeds as the stratum has, uniformly with replacement, then for each
//! drawn seed as many of its repeats as it has, with replacement from that
//! seed's own ([`Scheme::Runs`]). A seed is a run in rliable's sense (one
//! independent training run); its repeats score the same policy and are
//! not independent runs, so they are never pooled across seeds. When every
//! seed has one repeat (a matrix whose rows are runs) this is exactly
//! rliable's stratified bootstrap. With [`Scheme::Tasks`] each track's
//! tasks are also drawn, as many as the track has, with replacement: a
//! task drawn twice counts twice (with its one draw of runs). The
//! statistic is recomputed on each of `resamples` resamples and the
//! interval is the percentile interval: the `(1 − level)/2` and
//! `(1 + level)/2` quantiles of those values, linearly interpolated
//! between order statistics (numpy's default `percentile`).
//!
//! Two arms are resampled independently. A difference of means, its
//! interval, and P(A > B)'s interval use resample `r` of arm A together with
//! resample `r` of arm B. Under [`Scheme::Tasks`] the probability of
//! improvement weights its strata by a draw of tasks made once per
//! resample for the pair (so both directions see the same tasks). The
//! engine is [`resample`].
//!
//! # Randomness
//! Every resample has its own generator: SplitMix64 (Steele, Lea and
//! Flood, 2014) seeded with `mix(seed, stream, r)`, where `seed` is the
//! bootstrap seed given by the user, `stream` identifies the arm (in `bat
//! compare`, a hash of its position on the command line, see
//! [`stream_of`], mixed with a hash of the matrix shape being drawn) and `r`
//! is the resample number;
//! `mix` is SplitMix64's own finalizer applied in turn. Integers below `n`
//! come from Lemire's multiply-and-reject method, so they are exactly
//! uniform. The same seed, arms and data therefore give the same intervals
//! on every machine.
//!
//! # Verdict
//! [`Verdict::of`]: "A ahead" when the interval of the difference of means
//! (A − B) lies entirely above zero, "B ahead" when it lies entirely below,
//! otherwise "not distinguishable".

use serde::Serialize;

/// One (track, task) and its runs for one quantity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stratum {
    /// The track.
    pub track: String,
    /// The task id.
    pub task: String,
    /// Every recorded score of the task (seeds × repeats), grouped by
    /// seed.
    pub runs: Vec<f64>,
    /// How many of `runs` each seed holds, in order; empty: every run is
    /// a seed of its own (a matrix whose rows are runs, as rliable's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub seeds: Vec<usize>,
}

impl Stratum {
    /// Each seed's runs as (first index, count); a seed with no run is
    /// left out.
    pub fn seed_spans(&self) -> Vec<(u32, u32)> {
        if self.seeds.is_empty() || self.seeds.iter().sum::<usize>() != self.runs.len() {
            return (0..self.runs.len() as u32).map(|i| (i, 1)).collect();
        }
        let mut at = 0u32;
        let mut out = Vec::with_capacity(self.seeds.len());
        for n in &self.seeds {
            if *n > 0 {
                out.push((at, *n as u32));
            }
            at += *n as u32;
        }
        out
    }
}

/// One arm's scores for one quantity, by stratum.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ScoreMatrix {
    /// The strata, in a stable order (by track, then task).
    pub strata: Vec<Stratum>,
}

impl ScoreMatrix {
    /// Every score, stratum by stratum.
    pub fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.strata.iter().flat_map(|s| s.runs.iter().copied())
    }

    /// How many scores.
    pub fn len(&self) -> usize {
        self.strata.iter().map(|s| s.runs.len()).sum()
    }

    /// Whether there is no score.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `other` has the same strata (track, task, run count).
    pub fn same_shape(&self, other: &ScoreMatrix) -> bool {
        self.strata.len() == other.strata.len()
            && self.strata.iter().zip(&other.strata).all(|(a, b)| {
                a.track == b.track
                    && a.task == b.task
                    && a.runs.len() == b.runs.len()
                    && a.seed_spans() == b.seed_spans()
            })
    }
}

/// Which units a resample redraws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// Within each (track, task) stratum: seeds (runs), then each drawn
    /// seed's repeats (rliable's stratified bootstrap, a seed as a run).
    Runs,
    /// Tasks within each track as well, then as [`Scheme::Runs`].
    Tasks,
}

impl Scheme {
    /// The word used on the command line and in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Runs => "runs",
            Scheme::Tasks => "tasks",
        }
    }

    /// Parse `runs` or `tasks`.
    pub fn parse(s: &str) -> Option<Scheme> {
        match s {
            "runs" => Some(Scheme::Runs),
            "tasks" => Some(Scheme::Tasks),
            _ => None,
        }
    }
}

/// The bootstrap's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bootstrap {
    /// How many resamples.
    pub resamples: usize,
    /// The seed of every resample's generator.
    pub seed: u64,
    /// What a resample redraws.
    pub scheme: Scheme,
    /// The interval's coverage (0.95).
    pub level: f64,
}

/// The default number of resamples.
pub const DEFAULT_RESAMPLES: usize = 10_000;
/// The default bootstrap seed.
pub const DEFAULT_SEED: u64 = 0;

impl Default for Bootstrap {
    fn default() -> Self {
        Bootstrap {
            resamples: DEFAULT_RESAMPLES,
            seed: DEFAULT_SEED,
            scheme: Scheme::Runs,
            level: 0.95,
        }
    }
}

/// A point estimate with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// On the recorded data.
    pub point: f64,
    /// Lower bound of the interval.
    pub lo: f64,
    /// Upper bound of the interval.
    pub hi: f64,
}

impl Estimate {
    /// The point with the percentile interval of `dist` (reordered).
    pub fn from_dist(point: f64, dist: &mut [f64], level: f64) -> Estimate {
        let (lo, hi) = percentile_interval(dist, level);
        Estimate { point, lo, hi }
    }

    /// Whether the interval lies above zero.
    pub fn above_zero(&self) -> bool {
        self.lo > 0.0
    }

    /// Whether the interval lies below zero.
    pub fn below_zero(&self) -> bool {
        self.hi < 0.0
    }
}

/// The plain verdict of a pairwise comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The difference's interval lies above zero.
    AAhead,
    /// The difference's interval lies below zero.
    BAhead,
    /// The interval contains zero.
    NotDistinguishable,
}

impl Verdict {
    /// The verdict for the difference of means A − B.
    pub fn of(diff: &Estimate) -> Verdict {
        if diff.above_zero() {
            Verdict::AAhead
        } else if diff.below_zero() {
            Verdict::BAhead
        } else {
            Verdict::NotDistinguishable
        }
    }

    /// "A ahead" with the arms' labels filled in.
    pub fn sentence(self, a: &str, b: &str) -> String {
        match self {
            Verdict::AAhead => format!("{a} ahead"),
            Verdict::BAhead => format!("{b} ahead"),
            Verdict::NotDistinguishable => "not distinguishable".to_string(),
        }
    }
}

/// The mean of every score (`NaN` for none).
pub fn mean(m: &ScoreMatrix) -> f64 {
    let n = m.len();
    if n == 0 {
        return f64::NAN;
    }
    m.values().sum::<f64>() / n as f64
}

/// The interquartile mean of every score pooled (`NaN` for none).
pub fn iqm(m: &ScoreMatrix) -> f64 {
    let mut v: Vec<f64> = m.values().collect();
    trimmed_mean(&mut v)
}

/// The 25% trimmed mean of `v` (reordered).
pub fn trimmed_mean(v: &mut [f64]) -> f64 {
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let cut = n / 4;
    let kept = &v[cut..n - cut];
    kept.iter().sum::<f64>() / kept.len() as f64
}

/// Mann–Whitney's share for one stratum: pairs where `a` beats `b`, ties
/// one half, over all pairs.
pub fn stratum_improvement(a: &[f64], b: &[f64]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return f64::NAN;
    }
    let mut u = 0.0;
    for x in a {
        for y in b {
            u += cmp_half(*x, *y);
        }
    }
    u / (a.len() * b.len()) as f64
}

fn cmp_half(x: f64, y: f64) -> f64 {
    if x > y {
        1.0
    } else if x == y {
        0.5
    } else {
        0.0
    }
}

/// The strata of `a` that `b` also has (matched by track and task), as
/// index pairs, in `a`'s order.
pub fn shared_strata(a: &ScoreMatrix, b: &ScoreMatrix) -> Vec<(usize, usize)> {
    let mut index: std::collections::HashMap<(&str, &str), usize> =
        std::collections::HashMap::with_capacity(b.strata.len());
    for (j, s) in b.strata.iter().enumerate() {
        index.insert((&s.track, &s.task), j);
    }
    a.strata
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            index
                .get(&(s.track.as_str(), s.task.as_str()))
                .map(|j| (i, *j))
        })
        .filter(|(i, j)| !a.strata[*i].runs.is_empty() && !b.strata[*j].runs.is_empty())
        .collect()
}

/// P(A > B): the average over shared strata of [`stratum_improvement`]
/// (`NaN` when they share none).
pub fn probability_of_improvement(a: &ScoreMatrix, b: &ScoreMatrix) -> f64 {
    let pairs = shared_strata(a, b);
    if pairs.is_empty() {
        return f64::NAN;
    }
    pairs
        .iter()
        .map(|(i, j)| stratum_improvement(&a.strata[*i].runs, &b.strata[*j].runs))
        .sum::<f64>()
        / pairs.len() as f64
}

/// The `(1 − level)/2` and `(1 + level)/2` quantiles of `dist` (reordered
/// place), interpolated linearly; `(NaN, NaN)` for an empty one.
pub fn percentile_interval(dist: &mut [f64], level: f64) -> (f64, f64) {
    if dist.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    // Two order statistics per quantile, found by selection (linear time)
    // rather than a full sort: the same values a sort would give. The
    // upper quantile's are searched for only above the lower one's.
    let n = dist.len();
    let at = |p: f64| {
        let pos = p * (n - 1) as f64;
        let k = pos.floor() as usize;
        (k, pos - k as f64)
    };
    let (k_low, f_low) = at((1.0 - level) / 2.0);
    let (k_high, f_high) = at((1.0 + level) / 2.0);
    let low = order_stats(dist, k_low, f_low);
    let high = if k_high > k_low {
        order_stats(&mut dist[k_low + 1..], k_high - k_low - 1, f_high)
    } else {
        order_stats(dist, k_high, f_high)
    };
    (low, high)
}

/// The `k`-th smallest of `v` interpolated toward the next by `frac`
/// (reorders `v`: after it, `v[k]` is the `k`-th and everything above it
/// is no smaller).
fn order_stats(v: &mut [f64], k: usize, frac: f64) -> f64 {
    let (_, x, rest) = v.select_nth_unstable_by(k, f64::total_cmp);
    let x = *x;
    let y = rest.iter().copied().min_by(f64::total_cmp).unwrap_or(x);
    if frac == 0.0 {
        x
    } else {
        x + (y - x) * frac
    }
}

// ---------------------------------------------------------------- randomness

/// SplitMix64's output function.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64: a 64-bit state advanced by the golden-ratio constant and
/// finalized by [`mix64`].
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The generator of resample `r` of stream `stream` under `seed`.
    pub fn for_resample(seed: u64, stream: u64, r: u64) -> SplitMix64 {
        let s = mix64(mix64(mix64(seed.wrapping_add(GOLDEN)) ^ stream) ^ r.wrapping_mul(GOLDEN));
        SplitMix64 { state: s }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix64(self.state)
    }

    /// A uniform integer in `0..n` (`n > 0`), by Lemire's method.
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        let mut low = m as u64;
        if low < n {
            let threshold = n.wrapping_neg() % n;
            while low < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
                low = m as u64;
            }
        }
        (m >> 64) as u64
    }

    /// [`SplitMix64::below`] of `n = 2^(64 − shift)` (`shift` in 1..=63),
    /// without the wide product: for a power of two Lemire's method never
    /// rejects (its threshold, 2^64 mod n, is 0) and keeps the top bits, so
    /// this is the same number from the same step of the generator.
    pub fn below_pow2(&mut self, shift: u32) -> u64 {
        self.next_u64() >> shift
    }
}

/// A stream id: FNV-1a over the given names, each followed by a zero byte.
pub fn stream_of<'a>(names: impl IntoIterator<Item = &'a str>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for n in names {
        for b in n.bytes().chain(std::iter::once(0)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

// ---------------------------------------------------------------- resampling

pub mod resample;
pub use resample::{resample, ArmRequest, PairRequest, Resampled, Shape};

/// What [`bootstrap`] computes for one matrix: its point estimates and the
/// statistic of every resample (unsorted, resample order).
#[derive(Debug, Clone)]
pub struct Distribution {
    /// The mean on the recorded data.
    pub mean: f64,
    /// The IQM on the recorded data.
    pub iqm: f64,
    /// The mean of each resample.
    pub means: Vec<f64>,
    /// The IQM of each resample (empty unless asked for).
    pub iqms: Vec<f64>,
}

impl Distribution {
    /// The mean with its interval.
    pub fn mean_estimate(&self, level: f64) -> Estimate {
        Estimate::from_dist(self.mean, &mut self.means.clone(), level)
    }

    /// The IQM with its interval (`NaN` bounds when not computed).
    pub fn iqm_estimate(&self, level: f64) -> Estimate {
        Estimate::from_dist(self.iqm, &mut self.iqms.clone(), level)
    }
}

/// Bootstrap several quantities of one arm: those of one shape (the same
/// strata, seeds and run counts — built from the same cells) share their
/// draws; each other shape is resampled on its own.
/// `with_iqm[i]` says whether the IQM of matrix `i` is resampled too (it
/// costs a second pass). One [`Distribution`] per matrix, in order.
pub fn bootstrap(
    matrices: &[&ScoreMatrix],
    with_iqm: &[bool],
    cfg: &Bootstrap,
    stream: u64,
) -> Vec<Distribution> {
    let req = ArmRequest {
        matrices: matrices.to_vec(),
        iqm: with_iqm.to_vec(),
        stream,
    };
    resample(&[req], &[], cfg, &mut |_| true)
        .expect("nothing asks to stop")
        .arms
        .pop()
        .expect("one arm in, one arm out")
}

/// A pairwise comparison of one quantity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pairwise {
    /// Mean of A minus mean of B, with its interval.
    pub difference: Estimate,
    /// P(A > B) with its interval.
    pub improvement: Estimate,
    /// The verdict from the difference's interval.
    pub verdict: Verdict,
}

/// Compare A and B on one quantity: `da`/`db` are their [`bootstrap`]
/// distributions under `cfg` with streams `sa`/`sb`; P(A > B)'s interval
/// redraws the same resamples.
pub fn pairwise(
    a: &ScoreMatrix,
    b: &ScoreMatrix,
    da: &Distribution,
    db: &Distribution,
    cfg: &Bootstrap,
    (sa, sb): (u64, u64),
) -> Pairwise {
    let mut diffs: Vec<f64> = da.means.iter().zip(&db.means).map(|(x, y)| x - y).collect();
    let difference = Estimate::from_dist(da.mean - db.mean, &mut diffs, cfg.level);
    let mut pis = improvement_dist(a, b, cfg, (sa, sb));
    let improvement = Estimate::from_dist(probability_of_improvement(a, b), &mut pis, cfg.level);
    Pairwise {
        difference,
        improvement,
        verdict: Verdict::of(&difference),
    }
}

/// P(A > B) on every resample, with each arm's runs drawn as in its own
/// [`bootstrap`] (streams `sa`, `sb`); under [`Scheme::Tasks`] the strata
/// are weighted by a draw, within each track, from a stream both
/// directions share. Empty when the arms share no stratum.
pub fn improvement_dist(
    a: &ScoreMatrix,
    b: &ScoreMatrix,
    cfg: &Bootstrap,
    (sa, sb): (u64, u64),
) -> Vec<f64> {
    if shared_strata(a, b).is_empty() {
        return Vec::new();
    }
    let arm = |m, stream| ArmRequest {
        matrices: vec![m],
        iqm: vec![false],
        stream,
    };
    let pair = PairRequest {
        a: 0,
        b: 1,
        items: vec![(0, 0)],
    };
    resample(&[arm(a, sa), arm(b, sb)], &[pair], cfg, &mut |_| true)
        .expect("nothing asks to stop")
        .pairs
        .swap_remove(0)
        .swap_remove(0)
}

/// The least-squares slope of `y` over `x` (`NaN` with fewer than two
/// distinct `x`).
pub fn slope(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len().min(y.len());
    if n < 2 {
        return f64::NAN;
    }
    let mx = x[..n].iter().sum::<f64>() / n as f64;
    let my = y[..n].iter().sum::<f64>() / n as f64;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (a, b) in x[..n].iter().zip(&y[..n]) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
    }
    if sxx == 0.0 {
        f64::NAN
    } else {
        sxy / sxx
    }
}

#[cfg(test)]
mod tests;
