//! The bootstrap engine: every quantity of every arm and the probability
//! of improvement of every pair, resample by resample, in one pass.
//!
//! Within one arm, matrices of one shape (the same strata, the same seeds
//! with the same repeat counts) share their draws: the final checkpoint
//! and every round's checkpoint of an arm usually have one shape, so one
//! draw per resample serves every score at every round. Each shape is a
//! *group* with its own generator stream, derived from the arm's stream
//! and the shape, so the same shape gets the same draws whatever else is
//! resampled with it — except a shape made of whole tracks of an earlier
//! group's (a track's score beside the all-track scores): it takes that
//! group's draw of its strata, which saves drawing them twice and lets
//! a track's interval come from the very resamples of the overall one.
//!
//! Per resample and group the engine draws integer multiplicities of every
//! cell ([`Shape::draw`]); a mean is then the sum of those counts times
//! the cells' scores (all of a group's matrices at once, cell by cell), an IQM a walk over the cells in ascending order
//! ([`weighted_trimmed_mean`]), and P(A > B) of a stratum the
//! Mann–Whitney count of the drawn runs, found from prefix sums of B's
//! counts in B's sorted order at ranks computed once ([`PairStratum`];
//! each B stratum's prefix sums once per resample, shared by every pair
//! item that has it on the B side, [`BSides`]): no
//! sorting and no allocation inside the resample loop. Resamples go in
//! chunks of [`CHUNK`]: each arm does the chunk's resamples in turn, then
//! the pairs use the chunk's draws; every result is what resampling one
//! resample at a time gives.

use super::{iqm, mean, Bootstrap, Distribution, Scheme, ScoreMatrix, SplitMix64};

/// The shape of a matrix, for drawing: each stratum's first cell in the
/// flattened order and its seeds as (first run, run count) within it, and
/// which strata share a track.
#[derive(Debug, Clone)]
pub struct Shape {
    offsets: Vec<usize>,
    seeds: Vec<Vec<(u32, u32)>>,
    tracks: Vec<Vec<usize>>,
    cells: usize,
}

impl Shape {
    /// The shape of `m` (a stratum without `seeds` has one seed per run).
    pub fn of(m: &ScoreMatrix) -> Shape {
        let mut offsets = Vec::with_capacity(m.strata.len());
        let mut seeds = Vec::with_capacity(m.strata.len());
        let mut tracks: Vec<(&str, Vec<usize>)> = Vec::new();
        let mut at = 0;
        for (i, s) in m.strata.iter().enumerate() {
            offsets.push(at);
            seeds.push(s.seed_spans());
            at += s.runs.len();
            match tracks.iter_mut().find(|(t, _)| *t == s.track) {
                Some((_, v)) => v.push(i),
                None => tracks.push((&s.track, vec![i])),
            }
        }
        Shape {
            offsets,
            seeds,
            tracks: tracks.into_iter().map(|(_, v)| v).collect(),
            cells: at,
        }
    }

    /// How many cells.
    pub fn cells(&self) -> usize {
        self.cells
    }

    /// Draw one resample. `runs` gets every cell's multiplicity from the
    /// two-level draw inside its stratum (as many seeds as the stratum has,
    /// with replacement; then, for each drawn seed, as many of its repeats
    /// as it has, with replacement); a seed with one run needs no second
    /// draw, so a stratum of single-run seeds is rliable's stratified
    /// draw. `weight` gets each stratum's multiplicity: 1 under
    /// [`Scheme::Runs`]; under [`Scheme::Tasks`] drawn after the runs,
    /// within each track, as many strata as the track has.
    pub fn draw(&self, scheme: Scheme, rng: &mut SplitMix64, runs: &mut [u32], weight: &mut [u32]) {
        runs.iter_mut().for_each(|c| *c = 0);
        for (s, seeds) in self.seeds.iter().enumerate() {
            let base = self.offsets[s];
            let g = seeds.len();
            for _ in 0..g {
                let (start, n) = if g == 1 {
                    seeds[0]
                } else {
                    seeds[rng.below(g as u64) as usize]
                };
                let first = base + start as usize;
                if n == 1 {
                    runs[first] += 1;
                } else if n.is_power_of_two() {
                    let shift = 64 - n.trailing_zeros();
                    for _ in 0..n {
                        runs[first + rng.below_pow2(shift) as usize] += 1;
                    }
                } else {
                    for _ in 0..n {
                        runs[first + rng.below(u64::from(n)) as usize] += 1;
                    }
                }
            }
        }
        match scheme {
            Scheme::Runs => weight.iter_mut().for_each(|w| *w = 1),
            Scheme::Tasks => {
                weight.iter_mut().for_each(|w| *w = 0);
                for track in &self.tracks {
                    for _ in 0..track.len() {
                        weight[track[rng.below(track.len() as u64) as usize]] += 1;
                    }
                }
            }
        }
    }
}

impl Shape {
    /// This shape's part of a draw of `parent` (whose stratum `map[i]` is
    /// this shape's stratum `i`, with the same seeds and repeats): its run
    /// counts and stratum weights.
    fn take(
        &self,
        parent: &Shape,
        map: &[usize],
        drawn: &Buffers,
        runs: &mut [u32],
        weight: &mut [u32],
    ) {
        for (i, k) in map.iter().enumerate() {
            let (at, from) = (self.offsets[i], parent.offsets[*k]);
            let n = self.offsets.get(i + 1).copied().unwrap_or(self.cells) - at;
            runs[at..at + n].copy_from_slice(&drawn.runs[from..from + n]);
            weight[i] = drawn.weight[*k];
        }
    }
}

/// One arm's request: its matrices and which of them get an IQM interval.
#[derive(Debug, Clone)]
pub struct ArmRequest<'a> {
    /// The matrices (any shapes).
    pub matrices: Vec<&'a ScoreMatrix>,
    /// Per matrix: resample its IQM too.
    pub iqm: Vec<bool>,
    /// The arm's generator stream.
    pub stream: u64,
}

/// One pair's request: P(A > B) on matrix `items[k].0` of arm `a` against
/// matrix `items[k].1` of arm `b`.
#[derive(Debug, Clone)]
pub struct PairRequest {
    /// Arm A's index.
    pub a: usize,
    /// Arm B's index.
    pub b: usize,
    /// (matrix of A, matrix of B) pairs.
    pub items: Vec<(usize, usize)>,
}

/// What [`resample`] computes.
#[derive(Debug, Clone)]
pub struct Resampled {
    /// Per arm, per matrix (in request order).
    pub arms: Vec<Vec<Distribution>>,
    /// Per pair, per item: P(A > B) on every resample.
    pub pairs: Vec<Vec<Vec<f64>>>,
}

/// The generator stream of the group of matrices shaped like `m` in an arm
/// with stream `stream`: the arm's stream mixed with a hash of the shape
/// (strata and seed spans), so a shape draws the same resamples whatever
/// else is asked of the arm.
fn group_stream(stream: u64, m: &ScoreMatrix) -> u64 {
    let mut words: Vec<String> = Vec::with_capacity(2 * m.strata.len());
    for s in &m.strata {
        words.push(format!("{}\u{1}{}", s.track, s.task));
        let spans: Vec<String> = s
            .seed_spans()
            .iter()
            .map(|(a, n)| format!("{a}+{n}"))
            .collect();
        words.push(spans.join(","));
    }
    stream ^ super::stream_of(words.iter().map(String::as_str))
}

/// A group: matrices of one shape, and where they are in the request.
struct Group {
    shape: Shape,
    members: Vec<usize>,
    flat: Vec<Vec<f64>>,
    /// The members' scores cell by cell (`rows[cell × members + k]`), so a
    /// resample's sums run over the members, contiguous, for each drawn
    /// cell (vectorized, and drawn-zero cells skipped).
    rows: Vec<f64>,
    orders: Vec<Option<Ranked>>,
    stream: u64,
    /// An earlier group of the arm whose strata include all of this one's,
    /// as whole tracks: this group takes that group's draw of its strata
    /// instead of drawing its own (`map[i]`: the parent's stratum for
    /// stratum `i`).
    parent: Option<(usize, Vec<usize>)>,
}

impl Group {
    fn fill_rows(&mut self) {
        let m = self.members.len();
        self.rows = vec![0.0; self.shape.cells * m];
        for (k, v) in self.flat.iter().enumerate() {
            for (cell, x) in v.iter().enumerate() {
                self.rows[cell * m + k] = *x;
            }
        }
    }
}

/// The group of each matrix of one arm, as (group, position in it), and
/// the matrices that repeat an earlier one of their group bit for bit
/// (the final checkpoint is its last round's; a held round keeps the
/// checkpoint before it) as (matrix, the earlier matrix): those are
/// resampled once.
type Grouping = (Vec<Group>, Vec<(usize, usize)>, Vec<(usize, usize)>);

fn groups(req: &ArmRequest<'_>) -> Grouping {
    let mut out: Vec<Group> = Vec::new();
    let mut at = Vec::with_capacity(req.matrices.len());
    let mut aliases = Vec::new();
    for (i, m) in req.matrices.iter().enumerate() {
        let g = match out
            .iter()
            .position(|g| req.matrices[g.members[0]].same_shape(m))
        {
            Some(g) => g,
            None => {
                let parent = out.iter().enumerate().find_map(|(g, grp)| {
                    whole_tracks_of(req.matrices[grp.members[0]], m).map(|map| (g, map))
                });
                out.push(Group {
                    shape: Shape::of(m),
                    members: Vec::new(),
                    flat: Vec::new(),
                    rows: Vec::new(),
                    orders: Vec::new(),
                    stream: group_stream(req.stream, m),
                    parent,
                });
                out.len() - 1
            }
        };
        let v: Vec<f64> = m.values().collect();
        let wants_iqm = req.iqm.get(i).copied().unwrap_or(false);
        let same = out[g].members.iter().zip(&out[g].flat).position(|(j, w)| {
            (!wants_iqm || req.iqm.get(*j).copied().unwrap_or(false))
                && w.len() == v.len()
                && w.iter().zip(&v).all(|(x, y)| x.to_bits() == y.to_bits())
        });
        if let Some(k) = same {
            at.push((g, k));
            aliases.push((i, out[g].members[k]));
            continue;
        }
        let order = wants_iqm.then(|| Ranked::of(&v));
        at.push((g, out[g].members.len()));
        out[g].members.push(i);
        out[g].flat.push(v);
        out[g].orders.push(order);
    }
    out.iter_mut().for_each(Group::fill_rows);
    (out, at, aliases)
}

/// Where the strata of `child` are among those of `parent`, when `child`
/// is made of whole tracks of `parent` (every stratum of each of its
/// tracks, with the same seeds and repeats, in the same order): a track's
/// score beside the arm's all-track scores. Its resamples are then the
/// parent's, restricted to its strata, which under either scheme is a
/// draw of its own strata (the tasks scheme draws tasks within each track
/// on its own).
fn whole_tracks_of(parent: &ScoreMatrix, child: &ScoreMatrix) -> Option<Vec<usize>> {
    if child.strata.is_empty() || child.strata.len() >= parent.strata.len() {
        return None;
    }
    let mut map = Vec::with_capacity(child.strata.len());
    let mut from = 0;
    for c in &child.strata {
        let k = from
            + parent.strata[from..]
                .iter()
                .position(|p| p.track == c.track && p.task == c.task)?;
        let p = &parent.strata[k];
        if p.runs.len() != c.runs.len() || p.seed_spans() != c.seed_spans() {
            return None;
        }
        map.push(k);
        from = k + 1;
    }
    let count =
        |strata: &[super::Stratum], track: &str| strata.iter().filter(|s| s.track == track).count();
    let whole = child
        .strata
        .iter()
        .all(|c| count(&parent.strata, &c.track) == count(&child.strata, &c.track));
    whole.then_some(map)
}

/// One shared stratum of a pair item, ranked once: for each of A's cells,
/// in A's cell order, how many of B's runs are lower (`lt`) and lower or
/// equal (`le`); B's cells in ascending order of score. The Mann–Whitney
/// count is a sum of integers, so A's cells can be visited in any order:
/// in their own order their drawn counts are one contiguous slice.
struct PairStratum {
    /// A's first cell in the flattened order.
    a_first: u32,
    /// Per A cell, in order: B's `lt` and `le` counts.
    a: Vec<(u32, u32)>,
    b_cells: Vec<u32>,
    track: usize,
}

/// The ranked shared strata of A's matrix `ma` and B's `mb`, and their
/// tracks (by A's track names) for the tasks scheme.
fn rank_pair(ma: &ScoreMatrix, mb: &ScoreMatrix) -> (Vec<PairStratum>, usize) {
    let (oa, ob) = (offsets(ma), offsets(mb));
    let mut tracks: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for (i, j) in super::shared_strata(ma, mb) {
        let (ra, rb) = (&ma.strata[i].runs, &mb.strata[j].runs);
        let mut b_idx: Vec<usize> = (0..rb.len()).collect();
        b_idx.sort_by(|x, y| rb[*x].total_cmp(&rb[*y]));
        let b_sorted: Vec<f64> = b_idx.iter().map(|k| rb[*k]).collect();
        let a = ra
            .iter()
            .map(|x| {
                (
                    b_sorted.partition_point(|y| y < x) as u32,
                    b_sorted.partition_point(|y| y <= x) as u32,
                )
            })
            .collect();
        let t = ma.strata[i].track.as_str();
        let track = match tracks.iter().position(|x| *x == t) {
            Some(k) => k,
            None => {
                tracks.push(t);
                tracks.len() - 1
            }
        };
        out.push(PairStratum {
            a_first: oa[i] as u32,
            a,
            b_cells: b_idx.iter().map(|x| (ob[j] + x) as u32).collect(),
            track,
        });
    }
    (out, tracks.len())
}

fn offsets(m: &ScoreMatrix) -> Vec<usize> {
    let mut at = 0;
    m.strata
        .iter()
        .map(|s| {
            let o = at;
            at += s.runs.len();
            o
        })
        .collect()
}

/// The B side of one shared stratum: B's cells of it in ascending order
/// of score, in one group of one arm. Pairs whose B is that arm (and
/// items whose B stratum is that one) share it, so its prefix sums of
/// drawn counts are found once per resample, not once per pair item.
struct BSide {
    arm: usize,
    group: usize,
    cells: Vec<u32>,
    /// Where its prefix sums start in the resample's prefix buffer: entry
    /// `at` is 0, `at + k` the count of its first `k` cells.
    at: usize,
}

/// Every B side of every pair item, each once, with the prefix buffer's
/// layout.
#[derive(Default)]
struct BSides {
    sides: Vec<BSide>,
    len: usize,
}

impl BSides {
    /// The prefix offset of B cells `cells` of arm `arm`'s group `group`,
    /// adding them when new.
    fn slot(&mut self, arm: usize, group: usize, cells: &[u32]) -> usize {
        if let Some(s) = self
            .sides
            .iter()
            .find(|s| s.arm == arm && s.group == group && s.cells == cells)
        {
            return s.at;
        }
        let at = self.len;
        self.len += cells.len() + 1;
        self.sides.push(BSide {
            arm,
            group,
            cells: cells.to_vec(),
            at,
        });
        at
    }

    /// This resample's prefix sums of every B side, from each arm's
    /// group's drawn counts (in `u32`, as the counts are: half the cache
    /// of `u64` for a buffer that every pair reads).
    fn fill(&self, buffers: &[Vec<Vec<Buffers>>], slot: usize, prefix: &mut Vec<u32>) {
        prefix.resize(self.len, 0);
        for s in &self.sides {
            let counts = &buffers[s.arm][slot][s.group].runs;
            let out = &mut prefix[s.at..=s.at + s.cells.len()];
            out[0] = 0;
            let mut run = 0u32;
            for (p, c) in out[1..].iter_mut().zip(&s.cells) {
                run += counts[*c as usize];
                *p = run;
            }
        }
    }
}

/// One stratum of a [`FlatStrata`].
struct Span {
    /// Its A entries: `lt[a0..a1]`.
    a0: usize,
    a1: usize,
    /// Its tied A entries: `ties[t0..t1]`.
    t0: usize,
    t1: usize,
    /// Where B's total drawn count is in the prefix buffer.
    b_end: usize,
    /// A's first cell.
    first: usize,
}

/// A pair item's ranked strata laid end to end for the resample loop:
/// each stratum's A entries are a range of one flat array, with B's
/// ranks turned into positions in the shared prefix buffer.
///
/// The Mann–Whitney count of a stratum is `Σ x × (P[lt] + P[le])` over A's
/// cells (`x` its drawn count, `P` B's prefix sums). Where no B run ties
/// an A cell, `lt = le` and the term is `2 x P[lt]`, so the loop reads one
/// prefix per cell and doubles the sum; the cells that do tie are then
/// corrected by `x × (P[le] − P[lt])`, from a list of their own. All of it
/// is integer arithmetic, so the count is exactly what the two reads per
/// cell gave, with half the reads when scores are continuous.
struct FlatStrata {
    spans: Vec<Span>,
    /// Per A cell (in cell order within a stratum): the prefix-buffer
    /// position of B's `lt`.
    lt: Vec<u32>,
    /// Per tied A cell: its place in its stratum, and the prefix-buffer
    /// positions of B's `lt` and `le`.
    ties: Vec<(u32, u32, u32)>,
}

impl FlatStrata {
    fn of(strata: &[PairStratum], arm_b: usize, gb: usize, sides: &mut BSides) -> FlatStrata {
        let mut f = FlatStrata {
            spans: Vec::with_capacity(strata.len()),
            lt: Vec::new(),
            ties: Vec::new(),
        };
        for s in strata {
            let at = sides.slot(arm_b, gb, &s.b_cells) as u32;
            let (a0, t0) = (f.lt.len(), f.ties.len());
            for (k, (lt, le)) in s.a.iter().enumerate() {
                f.lt.push(at + lt);
                if lt != le {
                    f.ties.push((k as u32, at + lt, at + le));
                }
            }
            f.spans.push(Span {
                a0,
                a1: f.lt.len(),
                t0,
                t1: f.ties.len(),
                b_end: at as usize + s.b_cells.len(),
                first: s.a_first as usize,
            });
        }
        f
    }
}

/// One item of one pair, ready for the loop.
struct PairItem {
    strata: FlatStrata,
    tracks: Vec<Vec<usize>>,
    ga: usize,
}

/// Resample every arm and pair: `resamples` times, each arm's groups
/// drawn from their own streams (resample `r` of a group always gets the
/// same draw), then each pair's P(A > B) from the same draws of its two
/// arms' runs; under [`Scheme::Tasks`] a pair's strata are weighted by a
/// draw of tasks within tracks from a stream the pair shares, so both
/// directions see the same tasks. `keep_going` is asked every 256
/// resamples with how many are done; `None` when it said stop.
pub fn resample(
    arms: &[ArmRequest<'_>],
    pairs: &[PairRequest],
    cfg: &Bootstrap,
    keep_going: &mut dyn FnMut(usize) -> bool,
) -> Option<Resampled> {
    let arm_groups: Vec<Grouping> = arms.iter().map(groups).collect();
    let mut out: Vec<Vec<Distribution>> = arms
        .iter()
        .map(|a| {
            a.matrices
                .iter()
                .enumerate()
                .map(|(i, m)| Distribution {
                    mean: mean(m),
                    iqm: iqm(m),
                    means: Vec::with_capacity(cfg.resamples),
                    iqms: if a.iqm.get(i).copied().unwrap_or(false) {
                        Vec::with_capacity(cfg.resamples)
                    } else {
                        Vec::new()
                    },
                })
                .collect()
        })
        .collect();
    let (items, sides) = pair_items(arms, pairs, &arm_groups);
    let mut pair_out: Vec<Vec<Vec<f64>>> = items
        .iter()
        .map(|v| {
            v.iter()
                .map(|_| Vec::with_capacity(cfg.resamples))
                .collect()
        })
        .collect();
    // Per arm, per resample of a chunk, per group: run counts, stratum
    // weights, cell weights.
    let mut buffers: Vec<Vec<Vec<Buffers>>> = arm_groups
        .iter()
        .map(|(gs, _, _)| {
            (0..CHUNK)
                .map(|_| gs.iter().map(|g| Buffers::new(&g.shape)).collect())
                .collect()
        })
        .collect();
    let mut scratch = Scratch::default();
    let work = PairWork {
        arms,
        pairs,
        items: &items,
        cfg,
    };
    for r0 in (0..cfg.resamples).step_by(CHUNK) {
        if r0 % 256 == 0 && !keep_going(r0) {
            return None;
        }
        let chunk = r0..cfg.resamples.min(r0 + CHUNK);
        // Arm by arm over the chunk: an arm's score rows then stay in the
        // cache for its resamples, where all arms' rows, read once per
        // resample, do not fit a core's L2 (the means' sums spent half
        // their time reading them so).
        for ((gs, _, _), (bufs, dists)) in arm_groups
            .iter()
            .zip(buffers.iter_mut().zip(out.iter_mut()))
        {
            for (r, bufs) in chunk.clone().zip(bufs.iter_mut()) {
                let Scratch { sums, drawn, .. } = &mut scratch;
                for (gi, g) in gs.iter().enumerate() {
                    let (before, rest) = bufs.split_at_mut(gi);
                    let buf = &mut rest[0];
                    match &g.parent {
                        Some((p, map)) => {
                            let (pbuf, pshape) = (&before[*p], &gs[*p].shape);
                            g.shape
                                .take(pshape, map, pbuf, &mut buf.runs, &mut buf.weight);
                        }
                        None => {
                            let mut rng = SplitMix64::for_resample(cfg.seed, g.stream, r as u64);
                            g.shape
                                .draw(cfg.scheme, &mut rng, &mut buf.runs, &mut buf.weight);
                        }
                    }
                    buf.fill(&g.shape, drawn);
                    sums.clear();
                    sums.resize(g.members.len(), 0.0);
                    weighted_sums(&g.rows, drawn, sums);
                    for (((k, v), order), sum) in g
                        .members
                        .iter()
                        .zip(&g.flat)
                        .zip(&g.orders)
                        .zip(sums.iter())
                    {
                        let d = &mut dists[*k];
                        if buf.total == 0 {
                            d.means.push(f64::NAN);
                            if order.is_some() {
                                d.iqms.push(f64::NAN);
                            }
                            continue;
                        }
                        d.means.push(sum / f64::from(buf.total));
                        if let Some(order) = order {
                            d.iqms.push(order.trimmed_mean(v, &buf.cells, buf.total));
                        }
                    }
                }
            }
        }
        for (slot, r) in chunk.enumerate() {
            sides.fill(&buffers, slot, &mut scratch.prefix);
            let ca = |arm: usize, group: usize| buffers[arm][slot][group].runs.as_slice();
            pairs_once(&work, &mut pair_out, &ca, r, &mut scratch);
        }
    }
    for ((_, _, aliases), (dists, req)) in arm_groups.iter().zip(out.iter_mut().zip(arms)) {
        for (i, j) in aliases {
            let mut d = dists[*j].clone();
            if !req.iqm.get(*i).copied().unwrap_or(false) {
                d.iqms = Vec::new();
            }
            dists[*i] = d;
        }
    }
    Some(Resampled {
        arms: out,
        pairs: pair_out,
    })
}

/// Resamples per chunk: each arm does a chunk's resamples before the next
/// arm starts, and the pairs then use the chunk's draws.
const CHUNK: usize = 16;

/// The resample loop's reusable buffers.
#[derive(Default)]
struct Scratch {
    prefix: Vec<u32>,
    sums: Vec<f64>,
    drawn: Vec<(u32, f64)>,
    pair_weights: Vec<u32>,
    shares: Shares,
}

/// Every pair item of every pair, ranked and laid out for the loop, and
/// the B sides they share.
fn pair_items(
    arms: &[ArmRequest<'_>],
    pairs: &[PairRequest],
    arm_groups: &[Grouping],
) -> (Vec<Vec<PairItem>>, BSides) {
    let mut sides = BSides::default();
    let items = pairs
        .iter()
        .map(|p| {
            p.items
                .iter()
                .map(|(ia, ib)| {
                    let (ma, mb) = (arms[p.a].matrices[*ia], arms[p.b].matrices[*ib]);
                    let (strata, n_tracks) = rank_pair(ma, mb);
                    let mut tracks = vec![Vec::new(); n_tracks];
                    for (k, s) in strata.iter().enumerate() {
                        tracks[s.track].push(k);
                    }
                    let gb = arm_groups[p.b].1[*ib].0;
                    PairItem {
                        strata: FlatStrata::of(&strata, p.b, gb, &mut sides),
                        tracks,
                        ga: arm_groups[p.a].1[*ia].0,
                    }
                })
                .collect()
        })
        .collect();
    (items, sides)
}

/// What every resample of the pairs reads.
struct PairWork<'a, 'r> {
    arms: &'a [ArmRequest<'r>],
    pairs: &'a [PairRequest],
    items: &'a [Vec<PairItem>],
    cfg: &'a Bootstrap,
}

/// Resample `r` of every pair: P(A > B) of each item, from the arms' run
/// counts (`counts(arm, group)`) and the B sides' prefix sums already in
/// `scratch.prefix`; under [`Scheme::Tasks`] the strata are weighted by a
/// draw of tasks within tracks from a stream the two arms share.
fn pairs_once<'c>(
    work: &PairWork<'_, '_>,
    pair_out: &mut [Vec<Vec<f64>>],
    counts: &dyn Fn(usize, usize) -> &'c [u32],
    r: usize,
    scratch: &mut Scratch,
) {
    let PairWork {
        arms,
        pairs,
        items,
        cfg,
    } = work;
    for (p, (its, outs)) in pairs.iter().zip(items.iter().zip(pair_out.iter_mut())) {
        let shared_stream = arms[p.a].stream ^ arms[p.b].stream ^ 0x05ee_d0f7_a5c5;
        let mut shared = (cfg.scheme == Scheme::Tasks)
            .then(|| SplitMix64::for_resample(cfg.seed, shared_stream, r as u64));
        for (it, o) in its.iter().zip(outs.iter_mut()) {
            let weights = &mut scratch.pair_weights;
            weights.clear();
            weights.resize(it.strata.spans.len(), 1);
            if let Some(rs) = shared.as_mut() {
                weights.iter_mut().for_each(|w| *w = 0);
                for ks in &it.tracks {
                    for _ in 0..ks.len() {
                        weights[ks[rs.below(ks.len() as u64) as usize]] += 1;
                    }
                }
            }
            o.push(improvement_once(
                it,
                counts(p.a, it.ga),
                &scratch.prefix,
                weights,
                &mut scratch.shares,
            ));
        }
    }
}

/// P(A > B) of one resample: each weighted stratum's share of (drawn run
/// of A, drawn run of B) pairs that A wins, ties one half, counted in
/// integers, then the weighted average. `prefix` holds this resample's
/// prefix sums of B's drawn counts ([`BSides::fill`]). The counting, the
/// divisions and the average are three passes over the strata: the
/// divisions, independent of each other, then run two to an instruction
/// instead of each waiting in the running sum's chain (the same quotients
/// added in the same order: the same bits).
fn improvement_once(
    it: &PairItem,
    ca: &[u32],
    prefix: &[u32],
    weights: &[u32],
    shares: &mut Shares,
) -> f64 {
    let f = &it.strata;
    shares.num.resize(f.spans.len(), 0.0);
    shares.den.resize(f.spans.len(), 0.0);
    let out = shares.num.iter_mut().zip(shares.den.iter_mut());
    for ((span, w), (num, den)) in f.spans.iter().zip(weights).zip(out) {
        let (mut twice_u, mut tot_a) = (0u64, 0u64);
        if *w != 0 {
            let xs = &ca[span.first..span.first + (span.a1 - span.a0)];
            let mut u = 0u64;
            for (x, lt) in xs.iter().zip(&f.lt[span.a0..span.a1]) {
                let x = u64::from(*x);
                tot_a += x;
                u += x * u64::from(prefix[*lt as usize]);
            }
            twice_u = 2 * u;
            for &(k, lt, le) in &f.ties[span.t0..span.t1] {
                let x = u64::from(xs[k as usize]);
                twice_u += x * u64::from(prefix[le as usize] - prefix[lt as usize]);
            }
        }
        *num = real(twice_u);
        *den = real(2 * tot_a * u64::from(prefix[span.b_end]));
    }
    // 0 / 0 gives NaN for a skipped stratum; the average passes it over.
    for (n, d) in shares.num.iter_mut().zip(&shares.den) {
        *n /= *d;
    }
    let (mut acc, mut wsum) = (0.0, 0u64);
    for ((share, d), w) in shares.num.iter().zip(&shares.den).zip(weights) {
        if *w == 0 || *d == 0.0 {
            continue;
        }
        acc += f64::from(*w) * share;
        wsum += u64::from(*w);
    }
    if wsum == 0 {
        f64::NAN
    } else {
        acc / wsum as f64
    }
}

/// Scratch of [`improvement_once`]: per stratum, the numerator (then the
/// share) and the denominator.
#[derive(Default)]
struct Shares {
    num: Vec<f64>,
    den: Vec<f64>,
}

/// `x as f64` (the nearest double), through the signed conversion the CPU
/// has an instruction for when `x` fits it (always here: counts are small).
fn real(x: u64) -> f64 {
    match i64::try_from(x) {
        Ok(i) => i as f64,
        Err(_) => x as f64,
    }
}

/// Each member's sum over the drawn cells of multiplicity × score:
/// `sums[k] = Σ c × rows[cell × m + k]` over `drawn` (cell, c) in order,
/// `m = sums.len()`, one addition per drawn cell as a plain loop would do
/// (so the same bits). Members go in blocks whose running sums stay in
/// registers over all drawn cells, instead of a load and a store of every
/// sum for every cell.
pub(super) fn weighted_sums(rows: &[f64], drawn: &[(u32, f64)], sums: &mut [f64]) {
    let m = sums.len();
    let mut k = 0;
    while k < m {
        k += match m - k {
            16.. => block_sums::<16>(rows, m, k, drawn, sums),
            8.. => block_sums::<8>(rows, m, k, drawn, sums),
            4.. => block_sums::<4>(rows, m, k, drawn, sums),
            2.. => block_sums::<2>(rows, m, k, drawn, sums),
            _ => block_sums::<1>(rows, m, k, drawn, sums),
        };
    }
}

/// [`weighted_sums`] of members `k..k + B`; returns `B`.
fn block_sums<const B: usize>(
    rows: &[f64],
    m: usize,
    k: usize,
    drawn: &[(u32, f64)],
    sums: &mut [f64],
) -> usize {
    let mut acc = [0.0f64; B];
    for &(cell, c) in drawn {
        let at = cell as usize * m + k;
        let row: &[f64; B] = rows[at..at + B]
            .try_into()
            .expect("a block of B members lies inside the row");
        for (s, x) in acc.iter_mut().zip(row) {
            *s += c * x;
        }
    }
    sums[k..k + B].copy_from_slice(&acc);
    B
}

/// One group's draw: run counts, stratum weights, and each cell's
/// multiplicity (run count × stratum weight) and their total.
struct Buffers {
    runs: Vec<u32>,
    weight: Vec<u32>,
    cells: Vec<u32>,
    total: u32,
}

impl Buffers {
    fn new(shape: &Shape) -> Buffers {
        Buffers {
            runs: vec![0; shape.cells],
            weight: vec![0; shape.offsets.len()],
            cells: vec![0; shape.cells],
            total: 0,
        }
    }

    /// Each cell's multiplicity (run count × stratum weight) and their
    /// total, and into `drawn` the cells drawn at least once, in order,
    /// with their multiplicity as a float: one pass.
    fn fill(&mut self, shape: &Shape, drawn: &mut Vec<(u32, f64)>) {
        // Branch-free: every cell is written, only a drawn one advances
        // (whether a cell was drawn is a coin toss the CPU cannot predict).
        drawn.clear();
        drawn.resize(shape.cells, (0, 0.0));
        let mut total = 0u32;
        let mut n = 0;
        for (s, w) in self.weight.iter().enumerate() {
            let start = shape.offsets[s];
            let end = shape.offsets.get(s + 1).copied().unwrap_or(shape.cells);
            let cells = self.cells[start..end].iter_mut();
            for ((i, run), c) in (start..end).zip(&self.runs[start..end]).zip(cells) {
                *c = run * w;
                total += *c;
                drawn[n] = (i as u32, f64::from(*c));
                n += usize::from(*c != 0);
            }
        }
        drawn.truncate(n);
        self.total = total;
    }
}

/// A matrix's cells in ascending order of score, for its resampled IQMs.
struct Ranked {
    /// Cell numbers, ascending by score.
    order: Vec<u32>,
    /// The scores in that order.
    sorted: Vec<f64>,
    /// Whether every score is finite.
    finite: bool,
}

impl Ranked {
    fn of(v: &[f64]) -> Ranked {
        let mut order: Vec<u32> = (0..v.len() as u32).collect();
        order.sort_by(|a, b| v[*a as usize].total_cmp(&v[*b as usize]));
        Ranked {
            sorted: order.iter().map(|i| v[*i as usize]).collect(),
            order,
            finite: v.iter().all(|x| x.is_finite()),
        }
    }

    /// [`weighted_trimmed_mean`] of the scores `v` under `counts`: the
    /// same bits, by [`ranked_trimmed_mean`] when every score is finite.
    fn trimmed_mean(&self, v: &[f64], counts: &[u32], total: u32) -> f64 {
        if self.finite {
            ranked_trimmed_mean(&self.order, &self.sorted, counts, total)
        } else {
            weighted_trimmed_mean(&self.order, v, counts, total)
        }
    }
}

/// [`weighted_trimmed_mean`] with the scores already in ascending order
/// (`sorted[j]` is cell `order[j]`'s), in two steps: the cells wholly below
/// the kept ranks are passed over counting ranks only, then the kept ones
/// are summed as the plain walk does, in the same order, so for finite
/// scores the result is the same bits (the plain walk adds `0 × score`
/// for a skipped cell, which changes nothing unless the score is not
/// finite). `total > 0`.
pub fn ranked_trimmed_mean(order: &[u32], sorted: &[f64], counts: &[u32], total: u32) -> f64 {
    let cut = total / 4;
    let (lo, hi) = (cut, total - cut);
    let mut at = 0u32;
    let mut j = 0;
    while let Some(i) = order.get(j) {
        let next = at + counts[*i as usize];
        if next > lo {
            break;
        }
        at = next;
        j += 1;
    }
    let mut sum = 0.0;
    for (i, x) in order[j..].iter().zip(&sorted[j..]) {
        let start = at.max(lo);
        at += counts[*i as usize];
        if at >= hi {
            sum += f64::from(hi - start) * x;
            break;
        }
        sum += f64::from(at - start) * x;
    }
    sum / f64::from(hi - lo)
}

/// The 25% trimmed mean of a multiset given by `counts` over values `v`,
/// walking the cells in ascending order `order`: ranks `cut..total − cut`
/// are kept, `cut = floor(total / 4)`.
pub fn weighted_trimmed_mean(order: &[u32], v: &[f64], counts: &[u32], total: u32) -> f64 {
    let cut = total / 4;
    let (lo, hi) = (cut, total - cut);
    let mut at = 0u32;
    let mut sum = 0.0;
    // Branch-free but for the exit: a cell drawn zero times, or wholly
    // outside the kept ranks, adds 0 × its score.
    for &i in order {
        let start = at;
        at += counts[i as usize];
        let kept = at.min(hi).saturating_sub(start.max(lo));
        sum += f64::from(kept) * v[i as usize];
        if at >= hi {
            break;
        }
    }
    sum / f64::from(hi - lo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::stats::Stratum;

    /// A matrix of `tasks` strata over two tracks, with `seeds` seeds of
    /// `repeats` runs each, scores in quarters (so A and B tie often).
    fn tied(g: &mut SplitMix64, tasks: usize, seeds: usize, repeats: usize) -> ScoreMatrix {
        ScoreMatrix {
            strata: (0..tasks)
                .map(|i| Stratum {
                    track: format!("track{}", i % 2),
                    task: format!("t{i}"),
                    runs: (0..seeds * repeats)
                        .map(|_| g.below(5) as f64 / 4.0)
                        .collect(),
                    seeds: vec![repeats; seeds],
                })
                .collect(),
        }
    }

    fn request(m: &ScoreMatrix, stream: u64) -> ArmRequest<'_> {
        ArmRequest {
            matrices: vec![m],
            iqm: vec![true],
            stream,
        }
    }

    /// Resample `r`'s run counts of `m` in an arm with stream `stream`,
    /// drawn again from the group's stream.
    fn counts(m: &ScoreMatrix, stream: u64, cfg: &Bootstrap, r: usize) -> Vec<u32> {
        let shape = Shape::of(m);
        let mut runs = vec![0; shape.cells()];
        let mut weight = vec![0; m.strata.len()];
        let mut rng = SplitMix64::for_resample(cfg.seed, group_stream(stream, m), r as u64);
        shape.draw(Scheme::Runs, &mut rng, &mut runs, &mut weight);
        runs
    }

    #[test]
    fn improvement_with_ties_is_the_plain_pair_count() {
        let mut g = SplitMix64::for_resample(11, 12, 13);
        let cfg = Bootstrap {
            resamples: 37,
            ..Bootstrap::default()
        };
        for _ in 0..20 {
            let seeds = 1 + g.below(3) as usize;
            let (a, b) = (tied(&mut g, 4, seeds, 2), tied(&mut g, 4, 3, 1));
            let pair = PairRequest {
                a: 0,
                b: 1,
                items: vec![(0, 0)],
            };
            let got = resample(
                &[request(&a, 1), request(&b, 2)],
                &[pair],
                &cfg,
                &mut |_| true,
            )
            .expect("not stopped")
            .pairs
            .swap_remove(0)
            .swap_remove(0);
            for (r, p) in got.iter().enumerate() {
                let (ca, cb) = (counts(&a, 1, &cfg, r), counts(&b, 2, &cfg, r));
                let (oa, ob) = (offsets(&a), offsets(&b));
                let mut shares = Vec::new();
                for (s, (sa, sb)) in a.strata.iter().zip(&b.strata).enumerate() {
                    let (mut won, mut all) = (0.0, 0.0);
                    for (i, x) in sa.runs.iter().enumerate() {
                        for (j, y) in sb.runs.iter().enumerate() {
                            let n = f64::from(ca[oa[s] + i]) * f64::from(cb[ob[s] + j]);
                            all += n;
                            won += n * if x > y {
                                1.0
                            } else if x == y {
                                0.5
                            } else {
                                0.0
                            };
                        }
                    }
                    shares.push(won / all);
                }
                let want = shares.iter().sum::<f64>() / shares.len() as f64;
                assert!((p - want).abs() < 1e-12, "resample {r}: {p} vs {want}");
            }
        }
    }

    #[test]
    fn a_resample_does_not_depend_on_how_many_are_asked() {
        // Chunks of resamples must not change any resample's result: the
        // first results of a longer run are a shorter run's, bit for bit.
        let mut g = SplitMix64::for_resample(21, 22, 23);
        let (a, b) = (tied(&mut g, 6, 3, 2), tied(&mut g, 6, 2, 2));
        let run = |n: usize| {
            let cfg = Bootstrap {
                resamples: n,
                ..Bootstrap::default()
            };
            let pair = PairRequest {
                a: 0,
                b: 1,
                items: vec![(0, 0)],
            };
            resample(
                &[request(&a, 1), request(&b, 2)],
                &[pair],
                &cfg,
                &mut |_| true,
            )
            .expect("not stopped")
        };
        let long = run(3 * CHUNK + 5);
        for n in [1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 3] {
            let short = run(n);
            for (x, y) in short.arms.iter().flatten().zip(long.arms.iter().flatten()) {
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&x.means), bits(&y.means[..n]), "{n} resamples");
                assert_eq!(bits(&x.iqms), bits(&y.iqms[..n]), "{n} resamples");
            }
            let (x, y) = (&short.pairs[0][0], &long.pairs[0][0]);
            assert_eq!(x.len(), n);
            assert!(x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits()));
        }
    }
}
