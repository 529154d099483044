//! One operation delivered three times, as an at-least-once queue may do:
//! the guarded effect happens once, and the repeats get the first result.
//!
//! `cargo run -p onceonly-sqlite --example three_deliveries`

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use onceonly::{
    EffectCtx, EffectFn, EffectKind, EffectOutcome, Guard, JobSpec, Outcome, Payload, StalePolicy,
    Store,
};
use onceonly_sqlite::SqliteStore;

#[tokio::main]
async fn main() -> onceonly::Result<()> {
    let dir = std::env::temp_dir().join(format!("onceonly-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| onceonly::Error::Invalid(e.to_string()))?;
    let store =
        SqliteStore::connect(&format!("sqlite://{}", dir.join("example.db").display())).await?;
    store.migrate().await?;

    let guard = Guard::new(
        store,
        JobSpec::new("send_receipt", EffectKind::Opaque(StalePolicy::Hold)),
    )?;
    let emails_sent = Arc::new(AtomicU32::new(0));
    let send = EffectFn(|ctx: EffectCtx| {
        let emails_sent = emails_sent.clone();
        async move {
            emails_sent.fetch_add(1, Ordering::SeqCst);
            EffectOutcome::done_with_ref(format!("mail-for-{}", ctx.op_key))
        }
    });
    let payload = Payload::parse(r#"{"order": 42, "to": "customer@example.com"}"#)?;
    for delivery in 1..=3 {
        let outcome = guard.run("order-42", &payload, &send).await?;
        let what = match outcome {
            Outcome::Done { repeat: false, .. } => "sent the email".to_owned(),
            Outcome::Done {
                repeat: true,
                external_ref,
                ..
            } => {
                format!(
                    "repeat: already sent as {}",
                    external_ref.unwrap_or_default()
                )
            }
            other => format!("{other:?}"),
        };
        println!("delivery {delivery}: {what}");
    }
    println!(
        "effects: {} (one operation, delivered 3 times)",
        emails_sent.load(Ordering::SeqCst)
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
