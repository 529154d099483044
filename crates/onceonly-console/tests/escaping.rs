//! Values from outside shown on the console's pages: HTML-escaped already,
//! and their control characters escaped too (a destination's reference with
//! NUL/ESC/CR/LF/BEL, an error with a bidi override, a key with one).

mod common;

use std::time::Duration;

use common::*;
use onceonly::store::{ClaimRow, OpClaim, OpMove};
use onceonly::{Payload, State, Store};
use onceonly_console::Options;

const TOKEN: &str = "escaping-console-token";

#[tokio::test]
async fn pages_show_control_characters_escaped() {
    let (url, store) = sqlite().await;
    let payload = Payload::none();
    let key = "order-\u{202e}fdp.exe";
    let token = match store
        .op_claim(&OpClaim {
            job_type: "mail",
            op_key: key,
            fingerprint: &payload.fingerprint,
            payload: None,
            owner: "worker-1",
            lease: Duration::from_secs(60),
        })
        .await
        .unwrap()
    {
        ClaimRow::Claimed(c) => c.token,
        other => panic!("{other:?}"),
    };
    let moved = store
        .op_move(
            &OpMove::new("mail", key, token, State::Claimed, State::Failed)
                .with_external_ref(Some("ref\0\x1b[2J\r\nFAKE\x07"))
                .with_error("boom \u{202e}txt.exe"),
        )
        .await
        .unwrap();
    assert!(moved);
    held(&store, "mail", "held-\u{202e}gpj.exe").await;
    let mut options = Options::new(&url);
    options.token = Some(TOKEN.into());
    let base = serve(store, options).await;
    let c = logged_in(&base, "alice", Some(TOKEN)).await;
    for path in [op_path("mail", key), "/held".to_owned(), "/".to_owned()] {
        let (status, page) = get(&c, &format!("{base}{path}")).await;
        assert_eq!(status, 200, "{path}: {page}");
        for raw in ['\0', '\x1b', '\x07', '\u{202e}'] {
            assert!(!page.contains(raw), "{path} shows {raw:?} raw");
        }
    }
    let (_, page) = get(&c, &format!("{base}{}", op_path("mail", key))).await;
    assert!(page.contains("ref\\0\\x1b[2J\\r\\nFAKE\\x07"), "{page}");
    assert!(page.contains("boom \\u{202e}txt.exe"), "{page}");
    assert!(page.contains("order-\\u{202e}fdp.exe"), "{page}");
    let (_, page) = get(&c, &format!("{base}/held")).await;
    assert!(page.contains("held-\\u{202e}gpj.exe"), "{page}");
}
