//! A payload or result too large for a page: the operation page shows its
//! first 64 KiB, its full size and a download link; the link, behind the
//! same login, returns it whole, byte for byte, as a JSON attachment.

mod common;

use common::*;
use onceonly::operator::OperatorStore;
use onceonly::store::{Completion, OpCompleteBatch};
use onceonly::Payload;
use onceonly_console::Options;

const PAGE_LIMIT: usize = 200 * 1024;

async fn large_values_are_cut_and_downloadable<S: OperatorStore + Clone>(store: S) {
    let payload = Payload::parse(&format!(r#"{{"blob":"{}"}}"#, "a".repeat(5_000_000))).unwrap();
    // Two-byte characters, so the cut has to find a character's start.
    let result = format!(r#"{{"echo":"{}"}}"#, "é".repeat(1_500_000));
    let token = dead_claim(&store, "mail", "big", &payload).await;
    let done = store
        .op_complete_batch(&OpCompleteBatch {
            job_type: "mail",
            items: &[Completion {
                op_key: "big",
                token,
                external_ref: Some("ref-1"),
                result: &result,
            }],
        })
        .await
        .unwrap();
    assert_eq!(done, ["big"]);
    let stored = payload.json.clone().unwrap();

    let base = serve(store, Options::new("sqlite://unused.db")).await;
    let c = logged_in(&base, "alice", None).await;
    let (status, page) = get(&c, &format!("{base}{}", op_path("mail", "big"))).await;
    assert_eq!(status, 200);
    assert!(page.len() < PAGE_LIMIT, "the page is {} bytes", page.len());
    for (part, whole) in [("payload", &stored), ("result", &result)] {
        assert!(
            page.contains(&format!("{} bytes (", whole.len())),
            "{part}'s size is not stated"
        );
        // The link as the page's HTML escapes it.
        let link = format!("href=\"/op/{part}?job=mail&#38;key=big\"");
        assert!(page.contains(&link), "no {link} on the page");

        let url = format!("{base}/op/{part}?job=mail&key=big");
        let res = c.get(&url).send().await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["content-type"], "application/json");
        assert_eq!(
            res.headers()["content-disposition"],
            format!("attachment; filename=\"onceonly-{part}.json\"").as_str()
        );
        let body = res.bytes().await.unwrap();
        assert!(
            body == whole.as_bytes(),
            "the {part} downloaded is not the stored one"
        );

        // Behind the same login.
        let (status, login) = get(&client(), &url).await;
        assert_eq!(status, 401);
        assert!(!login.contains("aaaa"), "{login}");
    }
    let (status, _) = get(&c, &format!("{base}/op/payload?job=mail&key=none")).await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_values_on_sqlite() {
    let (_, store) = sqlite().await;
    large_values_are_cut_and_downloadable(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_values_on_postgres() {
    let Some((_, store)) = postgres("large_values_on_postgres").await else {
        return;
    };
    large_values_are_cut_and_downloadable(store).await;
}
