//! The root package's integration tests, one module per former test binary,
//! linked into this one binary: sixty binaries each linking `bat` made the
//! link step dominate the test build. Run one family with
//! `cargo test -p bat-cli --test runner loop_cli::`.
//!
//! Tests share this process: none of them changes the process environment
//! or working directory (each `bat` child gets its own, see `common`).
#![forbid(unsafe_code)]

mod common;

mod architecture;
mod backend_trl;
mod backend_verl;
mod comparability;
mod compare_arms;
mod compare_rliable;
mod config_cli;
mod contract_round_cli;
mod contract_round_conformance;
mod contract_round_figures;
mod contract_round_props;
mod demo_cli;
mod diff_deltas;
mod diff_plain;
mod diff_rounds;
mod docs_commands;
mod docs_errors;
mod errs_cli;
mod eval_contract;
mod eval_vectors;
mod export_query;
mod gc_auto;
mod hostile_bounded;
mod import_policy;
mod integrity_cli;
mod interrupt;
mod lazy_memory;
mod ledger_bad_input;
mod ledger_concurrency;
mod ledger_corruption;
mod ledger_crash;
mod ledger_crash_delta;
mod ledger_faults;
mod ledger_refs;
mod ledger_roundtrip;
mod loop_cli;
mod loop_conformance;
mod loop_toy;
mod metrics_cli;
mod mlflow;
mod on_round;
mod output_escape;
mod partial_clone;
mod python_api;
mod python_wheel;
mod remote_cli;
mod remote_private;
mod remote_refs;
mod remote_replay;
mod replay_scratch;
mod replay_signals;
mod replay_sim;
mod replay_toy;
mod report_browser;
mod report_html;
mod retention;
mod reward_cross;
mod round_commit;
mod round_meta;
mod round_provenance;
mod round_reference_fixture;
mod round_refs;
mod round_refusals;
mod rounds_rows;
mod run_arms;
mod run_commit_signals;
mod run_logs;
mod run_provenance;
mod run_resume;
mod run_signals;
mod run_templates;
mod s3_refs;
mod scale_cli;
mod seeds_remote;
mod seeds_serve;
mod serve_auth;
mod serve_cli;
mod serve_hostile;
mod serve_private;
mod serve_shutdown;
mod serve_transfer;
mod serve_ui;
mod share_pruned;
mod sim_cli;
mod step_metrics;
mod tensorboard;
mod terminal_cli;
mod transfer_pieces;
