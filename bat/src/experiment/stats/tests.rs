use super::*;
use proptest::prelude::*;

fn matrix(strata: &[(&str, &str, &[f64])]) -> ScoreMatrix {
    ScoreMatrix {
        strata: strata
            .iter()
            .map(|(t, k, r)| Stratum {
                track: t.to_string(),
                task: k.to_string(),
                runs: r.to_vec(),
                seeds: Vec::new(),
            })
            .collect(),
    }
}

fn cfg(resamples: usize) -> Bootstrap {
    Bootstrap {
        resamples,
        ..Bootstrap::default()
    }
}

#[test]
fn mean_and_iqm_by_hand() {
    let m = matrix(&[
        ("a", "t1", &[0.1, 0.9]),
        ("a", "t2", &[0.5, 0.3]),
        ("b", "t3", &[0.2, 0.4, 0.6, 0.8]),
    ]);
    assert!((mean(&m) - 3.8 / 8.0).abs() < 1e-12);
    // sorted: .1 .2 .3 .4 .5 .6 .8 .9 ; cut 2 each side -> .3 .4 .5 .6
    assert!((iqm(&m) - 0.45).abs() < 1e-12);
    assert_eq!(iqm(&matrix(&[("a", "t", &[0.7])])), 0.7);
    // three values: floor(3/4) = 0, nothing dropped
    assert!((iqm(&matrix(&[("a", "t", &[0.0, 0.3, 0.9])])) - 0.4).abs() < 1e-12);
    assert!(mean(&ScoreMatrix::default()).is_nan());
}

#[test]
fn improvement_counts_ties_half_and_sums_to_one() {
    let a = matrix(&[("x", "t1", &[0.5, 0.7]), ("x", "t2", &[0.1])]);
    let b = matrix(&[
        ("x", "t1", &[0.5, 0.6, 0.9]),
        ("x", "t2", &[0.1]),
        ("x", "t3", &[1.0]),
    ]);
    // t1: pairs (0.5: tie .5, lose, lose) (0.7: win, win, lose) = (0.5 + 2)/6; t2: tie 0.5
    let want = ((2.5 / 6.0) + 0.5) / 2.0;
    assert!((probability_of_improvement(&a, &b) - want).abs() < 1e-12);
    assert!(
        (probability_of_improvement(&a, &b) + probability_of_improvement(&b, &a) - 1.0).abs()
            < 1e-12
    );
    assert_eq!(probability_of_improvement(&a, &a), 0.5);
    assert!(probability_of_improvement(&a, &matrix(&[("y", "t", &[0.1])])).is_nan());
}

#[test]
fn percentile_matches_numpy_linear() {
    let mut d: Vec<f64> = (0..=100).rev().map(f64::from).collect();
    let (lo, hi) = percentile_interval(&mut d, 0.95);
    assert!((lo - 2.5).abs() < 1e-12 && (hi - 97.5).abs() < 1e-12);
    let mut d = vec![1.0, 2.0, 3.0, 4.0];
    // numpy.percentile([1,2,3,4], [2.5, 97.5]) = [1.075, 3.925]
    let (lo, hi) = percentile_interval(&mut d, 0.95);
    assert!((lo - 1.075).abs() < 1e-12 && (hi - 3.925).abs() < 1e-12);
}

#[test]
fn splitmix_matches_the_published_sequence_and_below_is_in_range() {
    // SplitMix64 seeded with 0 (state then advanced by the constant):
    // the first output of the reference implementation.
    let mut g = SplitMix64 { state: 0 };
    assert_eq!(g.next_u64(), 0xe220_a839_7b1d_cdaf);
    let mut g = SplitMix64::for_resample(7, 1, 2);
    let mut seen = [0u32; 3];
    for _ in 0..3000 {
        seen[g.below(3) as usize] += 1;
    }
    assert!(seen.iter().all(|&c| c > 800), "{seen:?}");
}

#[test]
fn resampled_trimmed_mean_equals_the_expanded_multiset() {
    let v: [f64; 7] = [0.3, 0.1, 0.9, 0.5, 0.5, 0.2, 0.8];
    let mut order: Vec<u32> = (0..v.len() as u32).collect();
    order.sort_by(|a, b| v[*a as usize].total_cmp(&v[*b as usize]));
    let mut g = SplitMix64::for_resample(1, 2, 3);
    for _ in 0..200 {
        let counts: Vec<u32> = (0..v.len()).map(|_| g.below(4) as u32).collect();
        let total: u32 = counts.iter().sum();
        if total == 0 {
            continue;
        }
        let mut expanded: Vec<f64> = counts
            .iter()
            .zip(&v)
            .flat_map(|(c, x)| std::iter::repeat_n(*x, *c as usize))
            .collect();
        let want = trimmed_mean(&mut expanded);
        let got = resample::weighted_trimmed_mean(&order, &v, &counts, total);
        assert!((want - got).abs() < 1e-12, "{counts:?}: {want} vs {got}");
    }
}

/// Scores in [-1, 1] with ties, and counts with many zeros.
fn draws(g: &mut SplitMix64, cells: usize) -> (Vec<f64>, Vec<u32>) {
    let v = (0..cells)
        .map(|_| (g.below(41) as f64 - 20.0) / 20.0 + (g.below(3) as f64) * 1e-3)
        .collect();
    let counts = (0..cells)
        .map(|_| [0, 0, 0, 1, 2, 3, 7][g.below(7) as usize])
        .collect();
    (v, counts)
}

#[test]
fn ranked_trimmed_mean_is_the_plain_walk_bit_for_bit() {
    let mut g = SplitMix64::for_resample(5, 6, 7);
    for cells in 1..60 {
        for _ in 0..20 {
            let (v, counts) = draws(&mut g, cells);
            let total: u32 = counts.iter().sum();
            if total == 0 {
                continue;
            }
            let mut order: Vec<u32> = (0..cells as u32).collect();
            order.sort_by(|a, b| v[*a as usize].total_cmp(&v[*b as usize]));
            let sorted: Vec<f64> = order.iter().map(|i| v[*i as usize]).collect();
            let want = resample::weighted_trimmed_mean(&order, &v, &counts, total);
            let got = resample::ranked_trimmed_mean(&order, &sorted, &counts, total);
            assert_eq!(want.to_bits(), got.to_bits(), "{v:?} {counts:?}");
        }
    }
}

#[test]
fn blocked_sums_are_the_plain_loop_bit_for_bit() {
    let mut g = SplitMix64::for_resample(8, 9, 10);
    for members in 0..41 {
        let cells = 1 + g.below(30) as usize;
        let (rows, _) = draws(&mut g, cells * members);
        let (_, counts) = draws(&mut g, cells);
        // The plain loop: every member's sum, cell by cell, drawn cells only.
        let mut want = vec![0.0f64; members];
        for (cell, c) in counts.iter().enumerate().filter(|(_, c)| **c != 0) {
            for (k, s) in want.iter_mut().enumerate() {
                *s += f64::from(*c) * rows[cell * members + k];
            }
        }
        let drawn: Vec<(u32, f64)> = counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c != 0)
            .map(|(i, c)| (i as u32, f64::from(*c)))
            .collect();
        let mut got = vec![f64::NAN; members];
        resample::weighted_sums(&rows, &drawn, &mut got);
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&want), bits(&got), "{members} members, {cells} cells");
    }
}

#[test]
fn percentile_interval_is_the_sorted_one_bit_for_bit() {
    let mut g = SplitMix64::for_resample(11, 12, 13);
    for n in 1..300 {
        let (d, _) = draws(&mut g, n);
        let mut sorted = d.clone();
        sorted.sort_by(f64::total_cmp);
        for level in [0.0, 0.5, 0.9, 0.95, 0.99, 1.0] {
            let q = |p: f64| {
                let pos = p * (n - 1) as f64;
                let k = pos.floor() as usize;
                let (x, y) = (sorted[k], sorted[(k + 1).min(n - 1)]);
                let frac = pos - k as f64;
                if frac == 0.0 {
                    x
                } else {
                    x + (y - x) * frac
                }
            };
            let want = (q((1.0 - level) / 2.0), q((1.0 + level) / 2.0));
            let got = percentile_interval(&mut d.clone(), level);
            assert_eq!(want.0.to_bits(), got.0.to_bits(), "{n} {level}");
            assert_eq!(want.1.to_bits(), got.1.to_bits(), "{n} {level}");
        }
    }
}

#[test]
fn tasks_scheme_draws_whole_tracks() {
    let m = matrix(&[
        ("a", "t1", &[0.0, 0.0]),
        ("a", "t2", &[1.0, 1.0]),
        ("b", "t3", &[0.5]),
    ]);
    let shape = Shape::of(&m);
    let (mut runs, mut weight) = (vec![0; shape.cells()], vec![0; 3]);
    let mut spread = Vec::new();
    for r in 0..200 {
        let mut g = SplitMix64::for_resample(0, 9, r);
        shape.draw(Scheme::Tasks, &mut g, &mut runs, &mut weight);
        assert_eq!(weight[0] + weight[1], 2, "two tasks drawn in track a");
        assert_eq!(weight[2], 1);
        assert_eq!(runs[0] + runs[1], 2, "every stratum's runs are drawn");
        assert_eq!(runs[4], 1);
        spread.push(weight[0]);
        let mut g = SplitMix64::for_resample(0, 9, r);
        shape.draw(Scheme::Runs, &mut g, &mut runs, &mut weight);
        assert_eq!(weight, [1, 1, 1]);
        assert_eq!(runs.iter().sum::<u32>(), 5);
    }
    // Under the tasks scheme t1 is drawn 0, 1 or 2 times.
    assert!(spread.contains(&0) && spread.contains(&1) && spread.contains(&2));
}

#[test]
fn seeds_are_drawn_before_their_repeats() {
    // Two seeds of three repeats each: a resample holds whole seeds' worth
    // of runs, three from each drawn seed.
    let m = ScoreMatrix {
        strata: vec![Stratum {
            track: "a".into(),
            task: "t".into(),
            runs: vec![0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
            seeds: vec![3, 3],
        }],
    };
    let shape = Shape::of(&m);
    let (mut runs, mut weight) = (vec![0; 6], vec![0; 1]);
    let mut both = [0; 3];
    for r in 0..300 {
        let mut g = SplitMix64::for_resample(4, 5, r);
        shape.draw(Scheme::Runs, &mut g, &mut runs, &mut weight);
        let first: u32 = runs[..3].iter().sum();
        let second: u32 = runs[3..].iter().sum();
        assert_eq!(first + second, 6);
        assert_eq!(first % 3, 0, "{runs:?}");
        both[(first / 3) as usize] += 1;
    }
    assert!(both.iter().all(|c| *c > 40), "{both:?}");
    // The interval of the mean spans the two seeds' means (0 and 1), which
    // pooling the six runs as independent would not.
    let c = cfg(2000);
    let e = bootstrap(&[&m], &[false], &c, 1)[0].mean_estimate(0.95);
    assert_eq!((e.lo, e.hi), (0.0, 1.0), "{e:?}");
}

#[test]
fn constant_scores_give_a_point_interval_and_no_verdict() {
    let a = matrix(&[("x", "t1", &[0.5, 0.5]), ("x", "t2", &[0.5, 0.5])]);
    let d = &bootstrap(&[&a], &[true], &cfg(500), 1)[0];
    let e = d.mean_estimate(0.95);
    assert_eq!((e.point, e.lo, e.hi), (0.5, 0.5, 0.5));
    let p = pairwise(&a, &a, d, d, &cfg(500), (1, 1));
    assert_eq!(p.verdict, Verdict::NotDistinguishable);
    assert_eq!(p.improvement.point, 0.5);
    assert_eq!(p.improvement.lo, 0.5);
}

#[test]
fn clearly_separated_arms_get_a_verdict() {
    let lo: Vec<f64> = (0..5).map(|i| 0.2 + 0.01 * f64::from(i)).collect();
    let hi: Vec<f64> = (0..5).map(|i| 0.6 + 0.01 * f64::from(i)).collect();
    let a = matrix(&[("x", "t1", &hi), ("x", "t2", &hi)]);
    let b = matrix(&[("x", "t1", &lo), ("x", "t2", &lo)]);
    let c = cfg(2000);
    let da = &bootstrap(&[&a], &[false], &c, 1)[0];
    let db = &bootstrap(&[&b], &[false], &c, 2)[0];
    let p = pairwise(&a, &b, da, db, &c, (1, 2));
    assert_eq!(p.verdict, Verdict::AAhead);
    assert_eq!(p.improvement.point, 1.0);
    let q = pairwise(&b, &a, db, da, &c, (2, 1));
    assert_eq!(q.verdict, Verdict::BAhead);
    assert!(
        (p.difference.lo + q.difference.hi).abs() < 1e-12,
        "mirrored intervals"
    );
    assert_eq!(Verdict::AAhead.sentence("bat", "grpo"), "bat ahead");
}

#[test]
fn slope_by_hand() {
    assert!((slope(&[0.0, 1.0, 2.0], &[1.0, 3.0, 5.0]) - 2.0).abs() < 1e-12);
    assert!(slope(&[1.0], &[1.0]).is_nan());
    assert!(slope(&[1.0, 1.0], &[0.0, 2.0]).is_nan());
}

fn arb_matrix(runs: std::ops::Range<usize>) -> impl Strategy<Value = ScoreMatrix> {
    (1usize..5, runs).prop_flat_map(|(tasks, n)| {
        prop::collection::vec(prop::collection::vec(0u8..=20, n), tasks).prop_map(|rows| {
            ScoreMatrix {
                strata: rows
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| Stratum {
                        track: if i % 2 == 0 { "a".into() } else { "b".into() },
                        task: format!("t{i}"),
                        runs: r.into_iter().map(|x| f64::from(x) / 20.0).collect(),
                        seeds: Vec::new(),
                    })
                    .collect(),
            }
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn intervals_contain_their_point(a in arb_matrix(1..6), b in arb_matrix(1..6), seed in 0u64..1000, tasks in any::<bool>()) {
        let c = Bootstrap { resamples: 400, seed, scheme: if tasks { Scheme::Tasks } else { Scheme::Runs }, level: 0.95 };
        let da = &bootstrap(&[&a], &[true], &c, 1)[0];
        let e = da.mean_estimate(0.95);
        prop_assert!(e.lo <= e.point + 1e-12 && e.point <= e.hi + 1e-12, "{e:?}");
        let db = &bootstrap(&[&b], &[false], &c, 2)[0];
        let p = pairwise(&a, &b, da, db, &c, (1, 2));
        prop_assert!(p.difference.lo <= p.difference.point + 1e-12 && p.difference.point <= p.difference.hi + 1e-12);
    }

    #[test]
    fn improvement_is_complementary(a in arb_matrix(1..6), b in arb_matrix(1..6), seed in 0u64..1000) {
        let pab = probability_of_improvement(&a, &b);
        let pba = probability_of_improvement(&b, &a);
        if !pab.is_nan() {
            prop_assert!((pab + pba - 1.0).abs() < 1e-12);
        }
        let c = Bootstrap { resamples: 50, seed, ..Bootstrap::default() };
        let x = improvement_dist(&a, &b, &c, (3, 4));
        let y = improvement_dist(&b, &a, &c, (4, 3));
        for (p, q) in x.iter().zip(&y) {
            prop_assert!((p + q - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn same_flags_same_output(a in arb_matrix(1..5), seed in 0u64..1000) {
        let c = Bootstrap { resamples: 100, seed, ..Bootstrap::default() };
        let x = bootstrap(&[&a], &[true], &c, 5);
        let y = bootstrap(&[&a], &[true], &c, 5);
        prop_assert_eq!(&x[0].means, &y[0].means);
        prop_assert_eq!(&x[0].iqms, &y[0].iqms);
    }

    #[test]
    fn more_seeds_narrow_the_interval(base in prop::collection::vec(prop::collection::vec(0u8..=20, 2), 2..5)) {
        // The same score distribution per task, with 2 and with 8 runs (the
        // two runs repeated four times): the interval narrows.
        let make = |k: usize| ScoreMatrix { strata: base.iter().enumerate().map(|(i, r)| Stratum {
            track: "a".into(), task: format!("t{i}"),
            runs: r.iter().cycle().take(2 * k).map(|x| f64::from(*x) / 20.0).collect(),
            seeds: Vec::new(),
        }).collect() };
        let c = Bootstrap { resamples: 2000, ..Bootstrap::default() };
        let few = bootstrap(&[&make(1)], &[false], &c, 1)[0].mean_estimate(0.95);
        let many = bootstrap(&[&make(4)], &[false], &c, 1)[0].mean_estimate(0.95);
        prop_assert!(many.hi - many.lo <= few.hi - few.lo + 1e-12, "{few:?} {many:?}");
    }
}

#[test]
fn below_a_power_of_two_is_lemires_draw() {
    for k in 1..=20u32 {
        let (mut a, mut b) = (
            SplitMix64::for_resample(7, u64::from(k), 3),
            SplitMix64::for_resample(7, u64::from(k), 3),
        );
        for _ in 0..1000 {
            assert_eq!(a.below(1 << k), b.below_pow2(64 - k), "n = 2^{k}");
        }
    }
}
