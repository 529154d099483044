//! Who holds a claim: host, process and a random part, so two workers in one
//! process are still told apart.

use rand::Rng;

/// A new owner id: `host:pid:random`.
pub fn new_owner() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into());
    let random: u32 = rand::rng().random();
    format!("{host}:{}:{random:08x}", std::process::id())
}
