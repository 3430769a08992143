//! The command-line layer: one file per verb, each an args struct whose doc
//! comments are the help, and a `run` function that calls the library and
//! prints. Verbs parse and check their arguments, call library functions
//! with typed inputs, and render the typed outcome; domain decisions (what
//! a clone maps, how a run is laid out, how a replay is planned) live in
//! the library. Verbs do not import each other: shared CLI pieces live in
//! `ledger_common`, `transfer_common` and `round_progress`.
//!
//! [`Session`] is built once in [`main`]; [`error`] holds the error kinds
//! and exit codes; [`output`] the EPIPE-aware stdout writer; [`interrupt`]
//! the Ctrl-C handler that sets the cancel flag the library checks.

#[macro_use]
pub mod output;
pub mod error;
pub mod interrupt;
pub mod output_path;

pub mod bind;
pub mod branch;
pub mod bundle;
pub mod cat;
pub mod checkout;
pub mod clone;
pub mod commit;
pub mod compare;
pub mod compare_text;
pub mod completion;
pub mod config;
pub mod conformance;
pub mod demo;
pub mod diff;
pub mod eval;
pub mod export;
pub mod fetch;
pub mod files_common;
pub mod firewall;
pub mod fsck;
pub mod gate;
pub mod gc;
pub mod graph;
pub mod init;
pub mod ledger_common;
pub mod log;
pub mod ls;
pub mod man;
pub mod mirror;
pub mod pack;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod pull;
pub mod push;
pub mod query;
pub mod reflog;
pub mod remote;
pub mod replay;
pub mod report;
pub mod reset;
pub mod revert;
pub mod reward;
pub mod round;
pub mod round_progress;
pub mod run;
pub mod run_code;
pub mod serve;
pub mod show;
pub mod sim;
pub mod source;
pub mod stats;
pub mod switch;
pub mod table;
pub mod tag;
pub mod term;
pub mod transfer_common;

/// bat — a reproducibility ledger for Benchmark-as-Teacher curriculum RL
/// post-training.
#[derive(Debug, Parser)]
#[command(name = "bat", version, about, long_about = None, after_help = error::EXIT_CODES_HELP)]
pub struct Cli {
    /// Find the ledger from DIR (walking up from there) instead of from the
    /// current directory. Overrides the BAT_DIR environment variable. Other
    /// paths, given or printed, stay relative to the current working
    /// directory (unlike `git -C`).
    #[arg(short = 'C', global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Print exactly one JSON document on stdout instead of text.
    #[arg(long, global = true)]
    pub json: bool,

    /// Token for http(s):// remotes (clone/fetch/pull/push, and the files a
    /// partial clone fetches on demand). Overrides the
    /// BAT_TOKEN environment variable.
    #[arg(long, global = true, value_name = "TOKEN")]
    pub token: Option<String>,

    /// Endpoint URL for s3:// remotes. Overrides AWS_ENDPOINT_URL; the
    /// region and credentials come from AWS_REGION / AWS_DEFAULT_REGION,
    /// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
    #[arg(long, global = true, value_name = "URL")]
    pub endpoint: Option<String>,

    /// Color the output: auto (when stdout is a terminal and NO_COLOR is
    /// unset), always, never.
    #[arg(long, global = true, value_name = "WHEN", default_value = "auto")]
    pub color: term::ColorWhen,

    /// Do not send long output (log, show, diff) through the pager
    /// (BAT_PAGER, else PAGER, else `less -FRX`; used only on a terminal).
    #[arg(long, global = true)]
    pub no_pager: bool,

    /// The verb to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Every verb of `bat`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a simulated BaT campaign and its terminal-reward ablation in a new ledger (start here).
    Demo(demo::DemoArgs),
    /// Create a new ledger.
    Init(init::InitArgs),
    /// Record a directory as a new commit.
    Commit(commit::CommitArgs),
    /// Show history.
    Log(log::LogArgs),
    /// Show a commit and its files.
    Show(show::ShowArgs),
    /// Compare two rounds section by section.
    Diff(diff::DiffArgs),
    /// List a directory of a commit.
    Ls(ls::LsArgs),
    /// Print a file's bytes.
    Cat(cat::CatArgs),
    /// Write a commit's files into a new directory.
    Checkout(checkout::CheckoutArgs),
    /// Attach HEAD to a branch.
    Switch(switch::SwitchArgs),
    /// List, create or delete branches.
    Branch(branch::BranchArgs),
    /// Create, list, move (-f) or delete (-d) tags.
    Tag(tag::TagArgs),
    /// Show how a ref moved.
    Reflog(reflog::ReflogArgs),
    /// Move the current branch.
    Reset(reset::ResetArgs),
    /// Undo a round's promotion with a new commit.
    Revert(revert::RevertArgs),
    /// Verify the ledger.
    Fsck(fsck::FsckArgs),
    /// Remove unreachable objects; with --keep POLICY, prune old checkpoints.
    ///
    /// Rewrites packs crash-safely; needs exclusive use of the ledger (not
    /// with --dry-run). `--keep POLICY` also prunes round checkpoints (the
    /// files under `candidate/` of round commits) the policy does not keep.
    /// POLICY is a comma-separated list of terms: `promoted` keeps what
    /// `refs/promoted/*` point at, `last=N` the candidates of the last N
    /// rounds of each branch, `tagged` what tags point at; e.g. `--keep
    /// promoted,last=3,tagged`. A pruned checkpoint keeps its record in
    /// history (ids, digests, tensor index, evaluation, gate: log, diff,
    /// compare work); reading its bytes fails with a "pruned" error until
    /// `bat fetch REMOTE` brings them back from a remote that has them.
    /// Kept delta records whose base is pruned are re-encoded first (same
    /// bytes, same ids). gc also moves the keyframe of each checkpoint
    /// piece's chain of versions to the chain's middle (same space, half
    /// the reading for the deepest versions; `--keep-chains` skips it).
    /// gc also removes stale scratch: replay work folders no replay uses
    /// any more (.bat/replays/<id>) and the folders of runs that committed
    /// no round (.bat/runs/<run-id>); never those of a run or replay in
    /// progress.
    Gc(gc::GcArgs),
    /// Show sizes and counts (--reclaimable: what gc --keep would free).
    Stats(stats::StatsArgs),
    /// Show or change the ledger's write settings (delta-depth, base-files).
    Config(config::ConfigArgs),
    /// Show or validate benchmark packs.
    Pack(pack::PackArgs),
    /// Build the safe source grid.
    Source(source::SourceArgs),
    /// Build or verify a three-pool round view.
    Round(round::RoundArgs),
    /// Evaluation summaries (`bat eval summarize`).
    Eval(eval::EvalArgs),
    /// Paired promotion gate and next-round prescription.
    Gate(gate::GateArgs),
    /// Leakage firewall (`bat firewall scan FILE`).
    Firewall(firewall::FirewallArgs),
    /// Bind an exported model folder to a gate evaluation arm.
    Bind(bind::BindArgs),
    /// Run a conformance vector directory and print a pass/fail table.
    Conformance(conformance::ConformanceArgs),
    /// Run the BaT loop (external trainer/evaluator commands, or --backend sim).
    Run(run::RunArgs),
    /// Re-run recorded rounds: verify them, or replay them as an ablation.
    Replay(replay::ReplayArgs),
    /// Compare two arms round by round and base → final.
    Compare(compare::CompareArgs),
    /// Write one row per round (CSV or JSON Lines).
    Export(export::ExportArgs),
    /// Run read-only SQL over rounds, commits, files and audits.
    Query(query::QueryArgs),
    /// Write a self-contained HTML report of a campaign with plots.
    Report(report::ReportArgs),
    /// Copy rounds into an experiment tracker (`bat mirror mlflow`).
    Mirror(mirror::MirrorArgs),
    /// Score rollouts with the BaT reward (the trainers' reward function).
    Reward(reward::RewardArgs),
    /// Simulator backend children (`bat run --backend sim` runs them).
    #[command(hide = true)]
    Sim(sim::SimArgs),
    /// Manage named remotes.
    Remote(remote::RemoteArgs),
    /// Copy a ledger (directory, bundle, endpoint) into a new directory.
    Clone(clone::CloneArgs),
    /// Download missing objects and update remote-tracking refs.
    Fetch(fetch::FetchArgs),
    /// Fetch, then fast-forward a branch.
    Pull(pull::PullArgs),
    /// Send a branch to a remote (atomic, compare-and-swap).
    Push(push::PushArgs),
    /// Create or verify a single-file bundle.
    Bundle(bundle::BundleArgs),
    /// Serve this ledger over HTTP.
    Serve(serve::ServeArgs),
    /// Print a shell completion script.
    Completion(completion::CompletionArgs),
    /// Write man pages (bat.1 and one per subcommand).
    Man(man::ManArgs),
}

pub use error::{CliError, CliResult, ErrorKind};

/// Settings of one invocation, built once in [`main`] from the global
/// options and the environment and handed to every verb: where the ledger
/// is, who the author is, how to reach remotes, how to print, and the
/// process-wide cancel flag.
#[derive(Debug, Clone)]
pub struct Session {
    /// `-C DIR`, else `BAT_DIR`, else none (current directory).
    pub dir: Option<PathBuf>,
    /// `--json` was given.
    pub json: bool,
    /// Network-remote settings from `--token`, `--endpoint` and the
    /// environment.
    pub net: bat::remote::NetOptions,
    /// `$BAT_AUTHOR`, else `$USER`, else "unknown" (a verb's `--author`
    /// overrides it through [`Session::author`]).
    pub default_author: String,
    /// Draw progress bars: stderr is a terminal and `--json` is off.
    pub progress: bool,
    /// Test hook: sleep this long per transfer progress update
    /// (`BAT_TEST_TRANSFER_DELAY_MS`) so a test can interrupt a transfer.
    pub transfer_delay: Option<std::time::Duration>,
    /// Test hook: sleep this long per progress update of any ledger
    /// operation (`BAT_TEST_PROGRESS_DELAY_MS`) so a test can interrupt a
    /// commit or checkout midway.
    pub progress_delay: Option<std::time::Duration>,
    /// Test hook: `bat run` sleeps this long between the spawn of the child
    /// with this label and recording its process group in the run lock
    /// (`BAT_TEST_CHILD_RECORD_DELAY=r02/trainer:MS`), so a test can kill
    /// bat inside that window.
    pub child_record_delay: Option<(String, std::time::Duration)>,
    /// The process arguments (lossy UTF-8), for "run it again" hints.
    pub argv: Vec<String>,
    /// Colors on or off (`--color`, `NO_COLOR`, stdout a terminal).
    pub paint: term::Paint,
}

impl Session {
    /// The directory to start ledger discovery from.
    pub fn start_dir(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(|| PathBuf::from("."))
    }

    /// The commit author: the verb's `--author` if given, else the default.
    pub fn author(&self, flag: Option<&str>) -> String {
        flag.map_or_else(|| self.default_author.clone(), str::to_string)
    }

    /// The command line of this invocation, as a shell would accept it
    /// (for "run it again" hints).
    pub fn rerun_command(&self) -> String {
        let quote = |a: &String| {
            if !a.is_empty()
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+%".contains(&b))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        };
        let mut words = vec!["bat".to_string()];
        words.extend(self.argv.iter().skip(1).map(quote));
        words.join(" ")
    }

    /// The cancel flag to pass to library operations (set by Ctrl-C /
    /// SIGTERM once [`interrupt::install`] ran).
    pub fn cancel(&self) -> &'static std::sync::atomic::AtomicBool {
        interrupt::flag()
    }

    /// Build the session from the parsed global options, the command line
    /// they came from and the environment.
    fn from_env(cli: &Cli, argv: Vec<String>) -> Session {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let secs = |k: &str| {
            env(k)
                .and_then(|v| v.parse::<u64>().ok())
                .map(|n| std::time::Duration::from_secs(n.max(1)))
        };
        let net = bat::remote::NetOptions {
            token: cli.token.clone().or_else(|| env("BAT_TOKEN")),
            http_connect_timeout: secs("BAT_HTTP_CONNECT_TIMEOUT"),
            http_read_timeout: secs("BAT_HTTP_READ_TIMEOUT"),
            s3: bat::remote::s3::S3Options {
                endpoint: cli.endpoint.clone().or_else(|| env("AWS_ENDPOINT_URL")),
                region: env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION")),
                access_key_id: env("AWS_ACCESS_KEY_ID"),
                secret_access_key: env("AWS_SECRET_ACCESS_KEY"),
                session_token: env("AWS_SESSION_TOKEN"),
            },
        };
        // Unlike the other variables, an empty BAT_AUTHOR / USER counts
        // (it did before the session existed).
        let default_author = std::env::var("BAT_AUTHOR")
            .or_else(|_| std::env::var("USER"))
            .unwrap_or_else(|_| "unknown".into());
        Session {
            dir: cli
                .dir
                .clone()
                .or_else(|| std::env::var_os("BAT_DIR").map(PathBuf::from)),
            json: cli.json,
            net,
            default_author,
            progress: !cli.json && std::io::stderr().is_terminal(),
            transfer_delay: env("BAT_TEST_TRANSFER_DELAY_MS")
                .and_then(|v| v.parse::<u64>().ok())
                .map(std::time::Duration::from_millis),
            progress_delay: env("BAT_TEST_PROGRESS_DELAY_MS")
                .and_then(|v| v.parse::<u64>().ok())
                .map(std::time::Duration::from_millis),
            child_record_delay: env("BAT_TEST_CHILD_RECORD_DELAY").and_then(|v| {
                let (label, ms) = v.rsplit_once(':')?;
                let ms = ms.parse::<u64>().ok()?;
                Some((label.to_string(), std::time::Duration::from_millis(ms)))
            }),
            argv,
            paint: term::Paint {
                on: cli
                    .color
                    .resolve(std::io::stdout().is_terminal(), env("NO_COLOR").is_some()),
            },
        }
    }
}

/// The `bat` executable this command runs as, when it is not the process's
/// own executable (set by [`main_with_args_as`]).
static SELF_EXE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// The program that runs `bat`: what the demo prints and what the
/// simulator backend starts as `{bat}`. The native binary, or the console
/// script the Python package installs (there the process's executable is
/// the Python interpreter, which cannot run `bat sim …`).
pub fn self_exe() -> std::io::Result<PathBuf> {
    match SELF_EXE.get() {
        Some(p) => Ok(p.clone()),
        None => std::env::current_exe(),
    }
}

/// [`main_with_args`] for a `bat` that is not the process's executable:
/// `exe` is what [`self_exe`] gives from now on (the first value set in a
/// process stays).
pub fn main_with_args_as<I, T>(exe: PathBuf, args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let _ = SELF_EXE.set(exe);
    main_with_args(args)
}

/// Parse the process's command line, run the verb, print errors. The only
/// place that reads the environment.
pub fn main() -> ExitCode {
    main_with_args(std::env::args_os())
}

/// [`main`] with the command line given: `args` starts with the program
/// name, as `std::env::args_os()` does. The Python package's `bat` console
/// script enters here with `sys.argv` (the process's own argv there is the
/// interpreter's). Usage errors, `--help` and `--version` are printed and
/// give their exit code (2 or 0) instead of ending the process.
pub fn main_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            // What `Cli::parse` does, minus the process exit. A closed
            // stdout (`bat --help | head -1`) is no reason to fail.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let argv = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let session = Session::from_env(&cli, argv);
    output::set_colors(session.paint.on);
    let pager = start_pager(&cli);
    // With a pager, Ctrl-C belongs to it: bat must not die and leave it
    // orphaned on the terminal, so the handler (a flag) is installed.
    if cli.command.is_cancellable() || pager.is_some() {
        interrupt::install();
    }
    let result = dispatch(cli.command, &session).and_then(|code| {
        // A reader that left after the last complete line (`bat log |
        // head`) is no failure of a command that already succeeded.
        match output::flush_stdout() {
            Err(e) if e.kind != ErrorKind::BrokenPipe => Err(e),
            _ => Ok(code),
        }
    });
    let result = match (pager, result) {
        // The user quit the pager before the end: that is how pagers are
        // used, not a failure.
        (Some(p), Err(e)) if e.kind == ErrorKind::BrokenPipe => {
            p.finish();
            Ok(ExitCode::SUCCESS)
        }
        (Some(p), r) => {
            p.finish();
            r
        }
        (None, r) => r,
    };
    let code = match result {
        Ok(code) => code,
        Err(e) if e.kind == ErrorKind::Interrupted => e
            .with_hint(format!("to finish, run again: {}", session.rerun_command()))
            .report(session.json),
        Err(e) => e.report(session.json),
    };
    // What a native binary's runtime does at exit, for a caller that goes
    // on (the Python console script): a partial last line printed before
    // an error is not lost.
    let _ = output::flush_stdout();
    code
}

/// Start the pager for verbs with long output, when stdout is a terminal,
/// neither `--json` nor `--no-pager` was given and a pager is configured.
fn start_pager(cli: &Cli) -> Option<term::Pager> {
    let long = matches!(
        cli.command,
        Command::Log(_) | Command::Show(_) | Command::Diff(_)
    );
    if !long || cli.json || cli.no_pager || !std::io::stdout().is_terminal() {
        return None;
    }
    let var = |k: &str| std::env::var(k).ok();
    term::Pager::start(&term::pager_command(var("BAT_PAGER"), var("PAGER"))?)
}

impl Command {
    /// Verbs that check the cancel flag and so install the Ctrl-C handler;
    /// every other verb keeps the default action (die at once), which is
    /// what a read-only command wants.
    fn is_cancellable(&self) -> bool {
        matches!(
            self,
            Command::Commit(_)
                | Command::Checkout(_)
                | Command::Cat(_)
                | Command::Diff(_)
                | Command::Fsck(_)
                | Command::Gc(_)
                | Command::Clone(_)
                | Command::Fetch(_)
                | Command::Pull(_)
                | Command::Push(_)
                | Command::Bundle(_)
                | Command::Query(_)
        )
    }
}

fn dispatch(command: Command, g: &Session) -> CliResult {
    match command {
        Command::Demo(a) => demo::run(a, g),
        Command::Init(a) => init::run(a, g),
        Command::Commit(a) => commit::run(a, g),
        Command::Log(a) => log::run(a, g),
        Command::Show(a) => show::run(a, g),
        Command::Diff(a) => diff::run(a, g),
        Command::Ls(a) => ls::run(a, g),
        Command::Cat(a) => cat::run(a, g),
        Command::Checkout(a) => checkout::run(a, g),
        Command::Switch(a) => switch::run(a, g),
        Command::Branch(a) => branch::run(a, g),
        Command::Tag(a) => tag::run(a, g),
        Command::Reflog(a) => reflog::run(a, g),
        Command::Reset(a) => reset::run(a, g),
        Command::Revert(a) => revert::run(a, g),
        Command::Fsck(a) => fsck::run(a, g),
        Command::Gc(a) => gc::run(a, g),
        Command::Stats(a) => stats::run(a, g),
        Command::Config(a) => config::run(a, g),
        Command::Pack(a) => pack::run(a, g),
        Command::Source(a) => source::run(a, g),
        Command::Round(a) => round::run(a, g),
        Command::Eval(a) => eval::run(a, g),
        Command::Gate(a) => gate::run(a, g),
        Command::Firewall(a) => firewall::run(a, g),
        Command::Bind(a) => bind::run(a, g),
        Command::Conformance(a) => conformance::run(a, g),
        Command::Run(a) => run::run(a, g),
        Command::Replay(a) => replay::run(a, g),
        Command::Compare(a) => compare::run(a, g),
        Command::Export(a) => export::run(a, g),
        Command::Query(a) => query::run(a, g),
        Command::Report(a) => report::run(a, g),
        Command::Mirror(a) => mirror::run(a, g),
        Command::Reward(a) => reward::run(a, g),
        Command::Sim(a) => sim::run(a, g),
        Command::Remote(a) => remote::run(a, g),
        Command::Clone(a) => clone::run(a, g),
        Command::Fetch(a) => fetch::run(a, g),
        Command::Pull(a) => pull::run(a, g),
        Command::Push(a) => push::run(a, g),
        Command::Bundle(a) => bundle::run(a, g),
        Command::Serve(a) => serve::run(a, g),
        Command::Completion(a) => completion::run(a, g),
        Command::Man(a) => man::run(a, g),
    }
}

/// Print a serializable value as one JSON document on stdout.
pub fn print_json<T: serde::Serialize>(value: &T) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::internal(format!("cannot encode JSON output: {e}")))?;
    outln!("{text}");
    Ok(())
}
