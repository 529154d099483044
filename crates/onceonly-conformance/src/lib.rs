//! The one test suite every onceonly [`Store`] must pass, in the manner of
//! River's `riverdrivertest`: each store's tests call [`conformance_tests!`]
//! with a [`StoreFactory`], and get one `#[tokio::test]` per case, each on a
//! fresh database so they run in parallel.
//!
//! A change of meaning in the `Store` trait changes this suite first.
#![forbid(unsafe_code)]

use std::future::Future;

use onceonly::{BoxError, Store};

pub mod cases;
pub mod effects;

/// Makes databases for the suite.
pub trait StoreFactory: Send + Sync + 'static {
    /// The store under test.
    type S: Store + Clone;

    /// A store on a new, empty, migrated database (a fresh SQLite file, or a
    /// fresh PostgreSQL schema).
    fn fresh(&self) -> impl Future<Output = Self::S> + Send;

    /// Another store, with its own connections, on the same database as
    /// `store`, sharing its clock offset (a second worker).
    fn second(&self, store: &Self::S) -> impl Future<Output = Self::S> + Send;

    /// Creates the user table local effects write to, on `store`'s
    /// database: `conformance_local (op_key TEXT NOT NULL)`, no unique
    /// constraint, so a second write of one key would show as a second row.
    fn local_table(&self, store: &Self::S) -> impl Future<Output = ()> + Send;

    /// Inserts one row for `op_key` into the user table through `conn`, the
    /// connection of the transaction a local effect runs in.
    fn local_insert(
        conn: &mut <Self::S as Store>::Conn,
        op_key: &str,
    ) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// How many committed rows the user table holds for `op_key`.
    fn local_count(&self, store: &Self::S, op_key: &str) -> impl Future<Output = i64> + Send;

    /// Why the database cannot be reached, if it cannot. Every case then
    /// fails, or skips when the server's skip variable (`ONCEONLY_SKIP_PG=1`,
    /// `ONCEONLY_SKIP_MYSQL=1`) is set outside CI
    /// ([`onceonly_sqlx::test_db::TestDb::ready`]).
    fn unavailable(&self) -> impl Future<Output = Option<String>> + Send {
        async { None }
    }

    /// The server [`StoreFactory::unavailable`] speaks of (PostgreSQL unless
    /// said otherwise).
    fn server(&self) -> &'static onceonly_sqlx::test_db::TestDb {
        &onceonly_sqlx::test_db::PG
    }
}

/// Called by every generated test before its case: `false` means skip.
pub async fn ready<F: StoreFactory>(factory: &F, case: &str) -> bool {
    factory.server().ready(case, factory.unavailable().await)
}

/// Expands to one `#[tokio::test]` per conformance case, each calling
/// `cases::NAME(&factory)`; `$factory` is an expression building the factory.
/// Every case in [`cases`] must be listed here.
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr) => {
        $crate::conformance_tests!(@each $factory;
            // delivery
            same_message_three_times,
            local_same_message_three_times,
            two_workers_race_100_runs,
            eight_workers_race_25_runs,
            local_two_workers_race,
            similar_operations_are_two_effects,
            keys_differing_by_case_or_trailing_space_are_three_operations,
            relays_claim_each_queued_operation_once,
            batch_completion_is_fenced_per_claim,
            batch_claim_respects_its_limit,
            // transitions
            store_follows_the_transition_table,
            claim_inserts_claimed_record,
            queued_operation_is_claimed,
            completion_records_result_and_reference,
            not_sent_releases_the_claim,
            permanent_failure_fails_the_record,
            failure_write_never_touches_completed,
            unknown_outcome_follows_the_kind,
            stale_take_over_moves_by_policy,
            // held, resolved by a person
            held_resolves_to_each_state,
            held_resolve_is_fenced,
            // crashes
            crash_keyed_once_at_destination,
            crash_lookup_once,
            crash_opaque_hold_no_extra,
            crash_opaque_at_least_once_one_extra,
            crash_opaque_at_most_once_no_redo,
            crash_local_exactly_once,
            // stale claims
            young_claim_left_old_claim_follows_policy,
            stale_take_over_race_has_one_winner,
            zombie_cannot_complete,
            failure_after_success_leaves_success,
            zombie_store_writes_are_refused,
            database_clock_decides_leases,
            // cancel
            queued_cancel_is_immediate,
            cancel_after_a_claim_withdraws_what_it_sent,
            cancel_after_a_claim_holds_when_not_looked_up,
            cancel_after_a_claim_stays_when_not_withdrawn,
            cancel_while_running_withdraws_after_the_effect,
            cancel_while_running_withdraw_fails_stays_completed,
            cancel_before_the_effect_stops_the_owner,
            cancel_requested_then_not_sent_ends_cancelled,
            cancel_requested_then_unknown_is_held,
            completed_cancel_withdraws_at_destination,
            completed_cancel_stays_completed_when_not_withdrawn,
            held_cancel_says_held,
            relay_shutdown_keeps_a_cancel_request,
            // input
            bad_input_is_refused_and_nothing_written,
            broken_timing_rule_refuses_the_guard,
            payload_mismatch_changes_nothing,
            enqueue_same_payload_is_a_noop,
            // timing
            heartbeat_keeps_a_long_job_claimed,
            timeout_stops_the_effect_before_it_acts,
            heartbeat_stops_a_worker_whose_claim_was_taken,
            unrenewed_lease_stops_the_effect,
            // relay
            relay_claims_next_while_writing_back,
            // retention
            purge_deletes_only_old_finished_records,
            relay_applies_its_retention,
            // audit trail
            happy_path_writes_no_audit,
            retries_are_audited,
            relay_retries_and_shutdown_are_audited,
            take_over_is_audited_by_policy,
            permanent_failure_and_hold_are_audited,
            lost_claim_is_audited,
            cancels_are_audited,
            compensation_is_audited,
            resolve_is_audited,
        );
    };
    (@each $factory:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let factory = $factory;
                if $crate::ready(&factory, stringify!($case)).await {
                    $crate::cases::$case(&factory).await;
                }
            }
        )*
    };
}

#[cfg(test)]
mod tests {
    /// Every `pub async fn` case in `src/cases/` is listed in the macro, so
    /// no store can skip a case by accident.
    #[test]
    fn every_case_is_in_the_macro() {
        let macro_text = include_str!("lib.rs");
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cases");
        let mut missing = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for line in text.lines() {
                let Some(rest) = line.strip_prefix("pub async fn ") else {
                    continue;
                };
                let name = rest.split(['<', '(']).next().unwrap();
                if !macro_text.contains(&format!("            {name},\n")) {
                    missing.push(name.to_owned());
                }
            }
        }
        assert!(
            missing.is_empty(),
            "cases missing from conformance_tests!: {missing:?}"
        );
    }
}
