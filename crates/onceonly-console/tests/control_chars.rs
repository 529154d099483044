//! Control characters from outside (a worker's owner name, a reason, a
//! destination's reference) are shown escaped on every page, as the CLI
//! shows them: no raw ESC, BEL, CR or bidirectional override reaches the
//! browser, and the escaped text says what was there.

mod common;

use std::time::Duration;

use common::*;
use onceonly::operator::OperatorStore;
use onceonly::store::OpTakeOver;
use onceonly::{Payload, State};
use onceonly_console::Options;

const OWNER: &str = "worker\u{1b}[2J";
const REASON: &str = "lease over\r\nFAKE: resolved by admin\u{7}\u{202e}dlrow";

/// Raw control characters in `page`, other than the newlines and tabs of
/// the HTML itself (which a browser shows as spaces).
fn raw_controls(page: &str) -> Vec<char> {
    page.chars()
        .filter(|&c| onceonly::answer::is_control(c) && c != '\n' && c != '\t')
        .collect()
}

async fn controls_are_escaped<S: OperatorStore + Clone>(store: S) {
    let payload = Payload::parse(r#"{"note":"\u202e reversed"}"#).unwrap();
    let stale = dead_claim(&store, "mail", "ctl", &payload).await;
    let taken = store
        .op_take_over(&OpTakeOver {
            job_type: "mail",
            op_key: "ctl",
            stale_token: stale,
            to: State::Held,
            owner: OWNER,
            lease: Duration::from_secs(30),
            reason: REASON,
        })
        .await
        .unwrap();
    assert!(taken.is_some());
    let base = serve(store, Options::new("sqlite://unused.db")).await;
    let c = logged_in(&base, "alice", None).await;
    for path in ["/held".to_owned(), op_path("mail", "ctl")] {
        let (status, page) = get(&c, &format!("{base}{path}")).await;
        assert_eq!(status, 200);
        assert_eq!(raw_controls(&page), Vec::<char>::new(), "{path}");
        assert!(page.contains("lease over\\r\\nFAKE"), "{path}: {page}");
        if path.starts_with("/op") {
            assert!(page.contains("worker\\x1b[2J"), "{page}");
            assert!(page.contains("\\x07\\u{202e}dlrow"), "{page}");
            assert!(page.contains("\\u{202e} reversed"), "{page}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controls_are_escaped_on_sqlite() {
    let (_, store) = sqlite().await;
    controls_are_escaped(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controls_are_escaped_on_postgres() {
    let Some((_, store)) = postgres("controls_are_escaped_on_postgres").await else {
        return;
    };
    controls_are_escaped(store).await;
}
