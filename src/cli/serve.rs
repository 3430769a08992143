//! `bat serve`

use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use super::ledger_common::open;
use super::{CliError, CliResult, Session};
use bat::serve::{serve_blocking, Limits, Scope, ServeConfig, Timeouts, TokenSet};

/// A timeout of at least one second (0 would refuse everything).
fn secs(n: u64) -> Duration {
    Duration::from_secs(n.max(1))
}

/// Serve this ledger over HTTP for `bat clone/fetch/pull/push`.
///
/// Prints `listening on http://ADDR` once the socket is bound, then serves
/// until SIGINT or SIGTERM. Without a token file every request is refused
/// unless `--allow-anonymous-read` is given. Private data (`.bat/private`)
/// is never served.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8765")]
    pub bind: String,

    /// File of accepted tokens, one per line: `read TOKEN` or `write TOKEN`.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// Refuse every upload and ref update, whatever the token.
    #[arg(long)]
    pub read_only: bool,

    /// Let requests without a token list refs and download objects.
    #[arg(long)]
    pub allow_anonymous_read: bool,

    /// Also serve a read-only web page of the ledger at /ui: branches,
    /// rounds, the report's plots and the campaigns `bat run` is running.
    /// A browser opens /ui?token=TOKEN once (a read token is enough).
    #[arg(long)]
    pub ui: bool,

    /// Seconds a client may take to send a request's headers.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub header_timeout: u64,

    /// Seconds a client may pause while sending a body or reading a
    /// response before it is disconnected.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub idle_timeout: u64,

    /// Seconds one request may take in all (downloads included).
    #[arg(long, value_name = "SECS", default_value_t = 6 * 3600)]
    pub request_timeout: u64,

    /// Seconds requests in flight may finish after SIGINT/SIGTERM.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub shutdown_grace: u64,

    /// Import uploads in batches of at most this many payload bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20, hide = true)]
    pub put_batch_bytes: usize,
}

/// Run `bat serve`.
pub fn run(args: ServeArgs, g: &Session) -> CliResult {
    let ledger_dir = open(g)?.dir().to_path_buf();
    let tokens = match &args.token_file {
        None => TokenSet::empty(),
        Some(p) => {
            // A token file is a few lines; 1 MiB bounds a wrong path.
            let text = bat_contract::fsutil::read_capped(p, 1 << 20)
                .and_then(|b| {
                    String::from_utf8(b).map_err(|e| {
                        std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error())
                    })
                })
                .map_err(|e| {
                    CliError::new(format!("cannot read token file {}: {e}", p.display())).usage()
                })?;
            TokenSet::parse(&text)
                .map_err(|e| CliError::new(format!("{}: {e}", p.display())).usage())?
        }
    };
    if tokens.is_empty() && !args.allow_anonymous_read {
        eprintln!(
            "warning: no tokens and no --allow-anonymous-read: every request will be refused"
        );
    }
    let listener = TcpListener::bind(&args.bind).map_err(|e| {
        CliError::new(format!("cannot listen on {}: {e}", args.bind))
            .with_hint("pick another port with --bind 127.0.0.1:PORT (0 = any free port)")
    })?;
    let addr = listener
        .local_addr()
        .map_err(|e| CliError::new(format!("cannot read the bound address: {e}")))?;
    if g.json {
        let mut v = serde_json::json!({ "listening": format!("http://{addr}") });
        if args.ui {
            v["ui"] = serde_json::json!(format!("http://{addr}/ui"));
        }
        outln!("{v}");
    } else {
        outln!("listening on http://{addr}");
        if args.ui {
            // On stderr: stdout's one line is for scripts waiting on it.
            eprintln!("live page: http://{addr}/ui?token=TOKEN (a read token)");
        }
    }
    let _ = std::io::stdout().flush();
    let config = ServeConfig {
        ledger_dir,
        tokens,
        anonymous: if args.allow_anonymous_read {
            Scope::Read
        } else {
            Scope::None
        },
        read_only: args.read_only,
        ui: args.ui,
        limits: Limits {
            put_batch_bytes: args.put_batch_bytes.max(1),
            ..Limits::default()
        },
        timeouts: Timeouts {
            header_read: secs(args.header_timeout),
            idle: secs(args.idle_timeout),
            request: secs(args.request_timeout),
            shutdown_grace: Duration::from_secs(args.shutdown_grace),
        },
    };
    serve_blocking(config, listener)?;
    eprintln!("bat serve: stopped");
    Ok(ExitCode::SUCCESS)
}
