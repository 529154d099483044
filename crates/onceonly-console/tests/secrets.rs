//! No secret on any page: a console started on a PostgreSQL URL carrying a
//! password — as `user:pass@` or as a `?password=` / `?sslpassword=`
//! option — shows it on no page: not on the login page before anyone logs
//! in, not on a logged-in page, not in an error a page shows.

mod common;

use std::time::Duration;

use common::*;
use onceonly::operator::OperatorStore;
use onceonly::Store;
use onceonly_console::Options;
use onceonly_postgres::{PgOptions, PgStore};

const TOKEN: &str = "s3cret-console-token";
const SECRET: &str = "pw-s3cret";

/// The test PostgreSQL's URL (trust authentication: any password is
/// accepted, so a URL carrying one still connects).
fn pg_url() -> String {
    onceonly_sqlx::test_db::pg_url()
}

/// The test URL with a password in each place a URL can carry one.
fn urls_with_a_password() -> Vec<String> {
    let base = url::Url::parse(&pg_url()).unwrap();
    let mut userinfo = base.clone();
    userinfo
        .set_password(Some(&format!("{SECRET}-userinfo")))
        .unwrap();
    let mut query = base.clone();
    query.set_query(Some(&format!("password={SECRET}-query")));
    let mut both = base.clone();
    both.set_password(Some(&format!("{SECRET}-both"))).unwrap();
    both.set_query(Some(&format!(
        "sslmode=prefer&password={SECRET}-both-query"
    )));
    vec![userinfo.into(), query.into(), both.into()]
}

async fn connect(url: &str) -> Option<PgStore> {
    let options = PgOptions::default()
        .schema(format!("t_secrets_{:08x}", rand::random::<u32>()))
        .max_connections(2);
    match PgStore::connect_with(url, options).await {
        Ok(store) => {
            store.migrate().await.unwrap();
            Some(store)
        }
        Err(e) => {
            let test = "no_database_password_on_any_page";
            onceonly_sqlx::test_db::PG.ready(test, Some(e.to_string()));
            None
        }
    }
}

fn options(url: &str) -> Options {
    let mut o = Options::new(url);
    o.token = Some(TOKEN.into());
    // A table that does not exist: the repeats page shows the error of its
    // own connection, made with the URL itself.
    o.repeats = Some(onceonly_tools::repeats::Request {
        table: "no_such_table".into(),
        key: "k".into(),
        at: "at".into(),
        deploys: Vec::new(),
        retry_window: Duration::from_secs(300),
        deploy_window: Duration::from_secs(600),
    });
    o
}

async fn every_page<S: OperatorStore + Clone>(url: &str, store: S) -> Vec<(String, String)> {
    let base = serve(store, options(url)).await;
    let mut pages = Vec::new();
    let anonymous = client();
    for path in ["/login", "/", "/held"] {
        pages.push((
            format!("{path} (no session)"),
            get(&anonymous, &format!("{base}{path}")).await.1,
        ));
    }
    let c = logged_in(&base, "alice", Some(TOKEN)).await;
    for path in [
        "/",
        "/held",
        "/stuck",
        "/check",
        "/repeats",
        "/op?job=j&key=none",
    ] {
        pages.push((path.to_owned(), get(&c, &format!("{base}{path}")).await.1));
    }
    pages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_database_password_on_any_page() {
    let host = url::Url::parse(&pg_url()).unwrap();
    let host = format!(
        "{}:{}",
        host.host_str().unwrap(),
        host.port().unwrap_or(5432)
    );
    for url in urls_with_a_password() {
        let Some(store) = connect(&url).await else {
            return;
        };
        for (path, page) in every_page(&url, store).await {
            assert!(
                !page.contains(SECRET),
                "{url}: {path} shows the password:\n{page}"
            );
            if path != "/repeats" {
                assert!(
                    page.contains(&host) || path.starts_with("/op"),
                    "{url}: {path} names the database:\n{page}"
                );
            }
        }
    }
}
