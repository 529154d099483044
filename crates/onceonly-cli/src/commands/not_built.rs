//! A subcommand whose cargo feature was off in this build: still listed,
//! it takes any arguments and says which feature to build with (rather
//! than clap's "unrecognized subcommand").

/// Whatever was given after the subcommand.
#[derive(clap::Args)]
pub struct Args {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    rest: Vec<String>,
}

/// The refusal, naming the feature.
pub fn refuse(feature: &str) -> anyhow::Result<std::process::ExitCode> {
    Err(super::consume::not_built(feature))
}
