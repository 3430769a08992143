//! Failures and small behaviours the user meets at the command line: a
//! conformance run over nothing fails, a round commit says it left `logs/`
//! out, `bat log --all` shows every branch, `--help` has no notes for
//! developers, `-C` leaves paths relative to the working directory, the
//! demo's commands run where `bat` is not on PATH, and a held gate says why
//! in `bat run` and `bat show`.

use std::process::Command;

use crate::common::round as round_common;
use crate::common::run::{example, ok, Toy, TOY_TRAINER_ARGS};
use crate::common::{self, bat, stderr, text, TestEnv};

#[test]
fn conformance_on_a_missing_or_empty_directory_fails_with_a_message() {
    let env = TestEnv::new();
    let out = bat()
        .args(["conformance"])
        .arg(env.path("nowhere"))
        .output()
        .expect("run bat");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("cannot read the conformance directory") && err.contains("nowhere"),
        "{err}"
    );
    assert!(!text(&out.stdout).contains("0 passed"), "{out:?}");

    let empty = env.path("empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let out = bat()
        .arg("conformance")
        .arg(&empty)
        .output()
        .expect("run bat");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stderr(&out).contains("holds no conformance vectors"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_round_commit_says_it_left_the_round_directory_logs_out() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let c = round_common::build_campaign(tmp.path());
    let logs = c.round("r01").join("logs");
    std::fs::create_dir_all(&logs).expect("mkdir logs");
    std::fs::write(logs.join("trainer.stdout"), b"step 1\n").expect("write log");
    let out = round_common::bat(&c.ledger)
        .args(["--json", "commit", "--no-code-repo"])
        .arg(c.round("r01"))
        .output()
        .expect("run bat");
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("warning:") && err.contains("was not recorded") && err.contains("logs"),
        "{err}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let warnings = doc["warnings"].as_array().expect("warnings");
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().is_some_and(|w| w.contains("was not recorded"))),
        "{doc}"
    );
    // And indeed: the commit holds no logs/.
    let show = round_common::bat(&c.ledger)
        .args(["--json", "show", "r01"])
        .output()
        .expect("run bat");
    let show: serde_json::Value = serde_json::from_slice(&show.stdout).expect("JSON");
    let files = show["files"].as_array().expect("files");
    assert!(!files.is_empty());
    assert!(
        files
            .iter()
            .all(|f| !f["path"].as_str().unwrap_or("").starts_with("logs/")),
        "{show}"
    );
}

#[test]
fn a_round_commit_without_logs_warns_about_nothing() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let c = round_common::build_campaign(tmp.path());
    let out = round_common::bat(&c.ledger)
        .args(["commit", "--no-code-repo"])
        .arg(c.round("r01"))
        .output()
        .expect("run bat");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("was not recorded"),
        "{}",
        stderr(&out)
    );
}

/// A ledger with `main` (two commits) and branch `arm-b` forked from the
/// first.
fn two_arms(env: &TestEnv) -> common::BatRunner {
    let l = env.init_ledger("ledger");
    for (name, branch) in [("one", None), ("two", Some("arm-b")), ("three", None)] {
        // Commit times are in seconds; distinct ones give the walk its
        // order (newest first).
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let d = env.path(name);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("f.txt"), name).expect("write");
        let mut args = vec!["commit".to_string(), common::utf8(&d).to_string()];
        args.extend(["-m".to_string(), format!("commit {name}")]);
        if let Some(b) = branch {
            args.extend(["--branch".to_string(), b.to_string()]);
        }
        l.ok(&args);
    }
    l
}

#[test]
fn log_all_shows_every_branch_and_graph_draws_them_as_lanes() {
    let env = TestEnv::new();
    let l = two_arms(&env);
    let head_only = l.ok(&["log"]);
    assert!(!head_only.contains("commit two"), "{head_only}");
    let all = l.ok(&["log", "--all"]);
    for m in ["commit one", "commit two", "commit three"] {
        assert!(all.contains(m), "{m} missing from:\n{all}");
    }
    let graph = l.ok(&["log", "--graph", "--all"]);
    for m in ["commit one", "commit two", "commit three"] {
        assert!(graph.contains(m), "{m} missing from:\n{graph}");
    }
    assert!(
        graph
            .lines()
            .any(|line| line.starts_with("| *") || line.starts_with("* |")),
        "two lanes side by side:\n{graph}"
    );
    let json = l.json(&["log", "--all"]);
    assert_eq!(json.as_array().map(Vec::len), Some(3), "{json}");
    // --all names no revision of its own.
    let (code, err) = l.fails(&["log", "--all", "main"]);
    assert_eq!(code, 2, "{err}");
}

/// The verbs `bat --help` lists.
fn verbs() -> Vec<String> {
    let out = common::succeeded(bat().arg("--help").output().expect("run bat"));
    let help = text(&out.stdout);
    let mut verbs = Vec::new();
    let mut in_commands = false;
    for line in help.lines() {
        if line.starts_with("Commands:") {
            in_commands = true;
            continue;
        }
        if in_commands {
            if line.trim().is_empty() {
                break;
            }
            if let Some(word) = line.split_whitespace().next() {
                if word != "help" {
                    verbs.push(word.to_string());
                }
            }
        }
    }
    verbs
}

#[test]
fn help_texts_carry_no_notes_meant_for_developers() {
    let verbs = verbs();
    assert!(verbs.len() > 20, "{verbs:?}");
    assert!(verbs.iter().any(|v| v == "commit"), "{verbs:?}");
    let commit = text(
        &common::succeeded(bat().args(["commit", "--help"]).output().expect("run bat")).stdout,
    );
    assert!(commit.contains("The directory to record"), "{commit}");
    for verb in &verbs {
        let out = common::succeeded(bat().args([verb, "--help"]).output().expect("run bat"));
        let help = text(&out.stdout);
        for note in ["clap", "Named `", "(Rust", "struct ", "enum "] {
            assert!(
                !help.contains(note),
                "`bat {verb} --help` carries a developer note ({note:?}):\n{help}"
            );
        }
    }
}

#[test]
fn dash_c_finds_the_ledger_but_paths_stay_relative_to_the_working_directory() {
    let env = TestEnv::new();
    let l = env.init_ledger("ledger");
    // `data` exists only in the working directory, not under the ledger.
    let cwd = env.path("work");
    std::fs::create_dir_all(cwd.join("data")).expect("mkdir");
    std::fs::write(cwd.join("data").join("a.txt"), b"a").expect("write");
    let out = bat()
        .current_dir(&cwd)
        .arg("-C")
        .arg(l.dir())
        .args(["commit", "data", "-m", "from the working directory"])
        .output()
        .expect("run bat");
    assert!(out.status.success(), "{}", stderr(&out));
    let log = l.ok(&["log"]);
    assert!(log.contains("from the working directory"), "{log}");
    // The help says so.
    let help = text(&common::succeeded(bat().arg("--help").output().expect("run bat")).stdout);
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("relative to the current working directory"),
        "{help}"
    );
}

/// `bat demo`'s `next:` commands.
fn next_commands(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .skip_while(|l| l.trim() != "next:")
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split("  #").next().unwrap_or(l).trim().to_string())
        .collect()
}

#[test]
fn the_demo_commands_run_where_bat_is_not_on_path() {
    let env = TestEnv::new();
    let dir = env.path("d");
    let out = bat()
        .env("PATH", "/usr/bin:/bin")
        .args([
            "demo",
            common::utf8(&dir),
            "--rounds",
            "2",
            "--batches",
            "10",
            "--seeds",
            "1",
        ])
        .output()
        .expect("run bat");
    let out = common::succeeded(out);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("cargo install --path ."), "{stdout}");
    let commands = next_commands(&stdout);
    assert!(commands.len() >= 4, "{stdout}");
    let exe = common::bat_exe().display().to_string();
    for c in &commands {
        assert!(c.starts_with(&exe), "{c:?} names the binary that ran");
    }
    // The printed `log` command runs as printed, in a shell without bat.
    let log = commands
        .iter()
        .find(|c| c.ends_with(" log --graph --all"))
        .expect("a log command");
    let run = Command::new("sh")
        .args(["-c", log])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("run sh");
    assert!(run.status.success(), "{log}: {}", stderr(&run));
    assert!(text(&run.stdout).contains("r02"), "{}", text(&run.stdout));
}

#[test]
fn the_demo_says_bat_when_bat_on_path_is_this_binary() {
    let env = TestEnv::new();
    let bin = env.path("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::os::unix::fs::symlink(common::bat_exe(), bin.join("bat")).expect("symlink");
    let out = bat()
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .args([
            "demo",
            common::utf8(&env.path("d")),
            "--rounds",
            "1",
            "--batches",
            "4",
            "--seeds",
            "1",
        ])
        .output()
        .expect("run bat");
    let stdout = text(&common::succeeded(out).stdout);
    assert!(!stdout.contains("cargo install"), "{stdout}");
    for c in next_commands(&stdout) {
        assert!(c.starts_with("bat -C "), "{c:?}");
    }
}

fn held_round_line<'a>(text: &'a str, round: &str) -> Option<&'a str> {
    text.lines()
        .find(|l| l.contains(&format!("{round}: gate hold")))
}

#[test]
fn a_held_gate_says_why_in_run_and_show() {
    let toy = Toy::new();
    // The toy trainer, whose r02 reports failed training health: the gate
    // holds r02 whatever the scores.
    let sh = toy.root.join("sick.sh");
    let script = format!(
        "'{}' \"$@\" || exit $?\nif [ \"$6\" = r02 ]; then echo '{{\"status\": \"failed\"}}' > \"$4\"; fi\n",
        example("toy_trainer").display()
    );
    std::fs::write(&sh, script).expect("write the trainer script");
    let mut t = vec![serde_json::json!("sh"), serde_json::json!(sh)];
    t.extend(TOY_TRAINER_ARGS.iter().map(|s| serde_json::json!(s)));
    let trainer = common::write_json(&toy.root.join("sick.json"), serde_json::Value::Array(t));
    let args = toy.run_args(&trainer, &toy.evaluator, 3);
    let out = ok(toy.run(&args));
    let err = stderr(&out);
    let line = held_round_line(&err, "r02").unwrap_or_else(|| panic!("no held r02:\n{err}"));
    assert!(line.contains("(held: "), "{line}");
    assert!(
        line.contains("dropped") || line.contains("training health"),
        "{line}"
    );
    // The closing summary repeats it.
    let summary = text(&out.stdout);
    let r02 = summary
        .lines()
        .find(|l| l.trim_start().starts_with("r02"))
        .unwrap_or_else(|| panic!("no r02 in:\n{summary}"));
    assert!(r02.contains("hold") && r02.contains("held: "), "{r02}");
    // Promoted rounds say nothing of the kind.
    assert!(
        !err.lines()
            .any(|l| l.contains("r01: gate promote") && l.contains("held")),
        "{err}"
    );
    // `bat show` of the held round prints the same reason.
    let show = crate::common::ok(&toy.ledger, &["show", "r02"]);
    let held = show
        .lines()
        .find(|l| l.starts_with("held"))
        .unwrap_or_else(|| panic!("no held line:\n{show}"));
    let reason = line
        .split("(held: ")
        .nth(1)
        .and_then(|r| r.strip_suffix(')'))
        .expect("reason");
    assert!(held.contains(reason), "{held} vs {reason}");
    let promoted = crate::common::ok(&toy.ledger, &["show", "r01"]);
    assert!(
        !promoted.lines().any(|l| l.starts_with("held")),
        "{promoted}"
    );
}
