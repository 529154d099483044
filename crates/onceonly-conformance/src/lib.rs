//! The one test suite every onceonly [`Store`] must pass, in the manner of
//! River's `riverdrivertest`: each store's tests call [`conformance_tests!`]
//! with a [`StoreFactory`], and get one `#[tokio::test]` per case, each on a
//! fresh database so they run in parallel.
//!
//! A change of meaning in the `Store` trait changes this suite first.
#![forbid(unsafe_code)]

use std::future::Future;

use onceonly::Store;

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

    /// Why the database cannot be reached, if it cannot. Outside CI the
    /// suite then skips each case with a loud message; under `CI=true` an
    /// unreachable database fails every case.
    fn unavailable(&self) -> impl Future<Output = Option<String>> + Send {
        async { None }
    }
}

/// Called by every generated test before its case: `false` means skip.
pub async fn ready<F: StoreFactory>(factory: &F, case: &str) -> bool {
    match factory.unavailable().await {
        None => true,
        Some(why) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{case}: database unreachable under CI=true: {why}")
        }
        Some(why) => {
            eprintln!("\n*** SKIPPED {case}: database unreachable: {why} (set CI=true to fail instead) ***\n");
            false
        }
    }
}

/// Expands to one `#[tokio::test]` per conformance case, each calling
/// `cases::NAME(&factory)`; `$factory` is an expression building the factory.
/// Every case in [`cases`] must be listed here.
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr) => {
        $crate::conformance_tests!(@each $factory;
            same_message_three_times,
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
