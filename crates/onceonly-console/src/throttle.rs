//! Wrong console tokens, counted per client address. After a few, that
//! address must wait before its next try, and each further wrong token
//! doubles the wait up to a cap, so a token cannot be guessed at network
//! speed; a right token after the wait logs in and clears the count. Other
//! addresses are never slowed, and the table is bounded.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;

/// How wrong tokens slow a client down.
#[derive(Debug, Clone, Copy)]
pub struct LoginThrottle {
    /// Wrong tokens a client may give before it has to wait.
    pub free_attempts: u32,
    /// The wait after the last free attempt; each further wrong token
    /// doubles it.
    pub first_wait: Duration,
    /// The longest wait.
    pub max_wait: Duration,
    /// Addresses remembered at most: when the table is full, those whose
    /// wait ended long ago go first, then the one that failed least lately.
    pub max_clients: usize,
}

impl Default for LoginThrottle {
    /// Five free attempts, then 1 s, 2 s, 4 s … up to 15 minutes; 10,000
    /// addresses.
    fn default() -> Self {
        Self {
            free_attempts: 5,
            first_wait: Duration::from_secs(1),
            max_wait: Duration::from_secs(15 * 60),
            max_clients: 10_000,
        }
    }
}

impl LoginThrottle {
    /// The wait imposed after the `failures`-th wrong token in a row.
    fn wait_after(&self, failures: u32) -> Option<Duration> {
        let over = failures.checked_sub(self.free_attempts)?;
        let factor = 2u32.checked_pow(over.min(31)).unwrap_or(u32::MAX);
        Some(
            self.first_wait
                .checked_mul(factor)
                .map_or(self.max_wait, |w| w.min(self.max_wait)),
        )
    }
}

/// Where a request comes from, as the throttle counts it: the peer's IPv4
/// address, or the /64 network of an IPv6 one (one host usually holds a
/// whole /64). Unknown when the routes are served without the peer's
/// address (not through [`crate::serve`]): all such requests count as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Client(Option<IpAddr>);

impl Client {
    fn of(addr: IpAddr) -> Self {
        match addr.to_canonical() {
            IpAddr::V6(v6) => {
                let net = u128::from(v6) & !((1u128 << 64) - 1);
                Client(Some(IpAddr::V6(Ipv6Addr::from(net))))
            }
            v4 => Client(Some(v4)),
        }
    }
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(IpAddr::V6(net)) => write!(f, "{net}/64"),
            Some(v4) => write!(f, "{v4}"),
            None => f.write_str("unknown"),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Client {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map_or(Client(None), |c| Client::of(c.0.ip())))
    }
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
    /// No try is taken from this client before then.
    wait_until: Instant,
}

/// The wrong tokens of each client, kept in memory.
pub(crate) struct Throttle {
    policy: LoginThrottle,
    clients: Mutex<HashMap<Client, Failures>>,
}

impl Throttle {
    pub fn new(policy: LoginThrottle) -> Self {
        Self {
            policy,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// Takes a try from `client`, or says how long it must still wait.
    /// The try is counted as wrong at once, under the same lock as the
    /// check, so tries sent in parallel cannot all pass the check before
    /// any is counted; a right token then clears the count
    /// ([`Throttle::succeeded`]). Ok: how many tries in a row this is.
    pub fn attempt(&self, client: Client, now: Instant) -> Result<u32, Duration> {
        let mut clients = self.clients.lock().expect("throttle lock");
        if let Some(f) = clients.get(&client) {
            let left = f.wait_until.saturating_duration_since(now);
            if !left.is_zero() {
                return Err(left);
            }
        }
        let forgotten = |f: &Failures| f.wait_until.max(f.last) + self.policy.max_wait <= now;
        if clients.len() >= self.policy.max_clients && !clients.contains_key(&client) {
            clients.retain(|_, f| !forgotten(f));
            if clients.len() >= self.policy.max_clients {
                let oldest = clients.iter().min_by_key(|(_, f)| f.last).map(|(c, _)| *c);
                oldest.map(|c| clients.remove(&c));
            }
        }
        let entry = clients.entry(client).or_insert(Failures {
            count: 0,
            last: now,
            wait_until: now,
        });
        if forgotten(entry) {
            entry.count = 0;
        }
        entry.count = entry.count.saturating_add(1);
        entry.last = now;
        entry.wait_until = now + self.policy.wait_after(entry.count).unwrap_or_default();
        Ok(entry.count)
    }

    /// A right token from `client`: its count starts again.
    pub fn succeeded(&self, client: Client) {
        self.clients.lock().expect("throttle lock").remove(&client);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.clients.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(addr: &str) -> Client {
        Client::of(addr.parse().unwrap())
    }

    #[test]
    fn waits_double_after_the_free_attempts_up_to_the_cap() {
        let t = Throttle::new(LoginThrottle::default());
        let c = client("203.0.113.7");
        let now = Instant::now();
        for n in 1..=4 {
            assert_eq!(t.attempt(c, now), Ok(n));
        }
        let mut at = now;
        for (n, secs) in [(5, 1), (6, 2), (7, 4), (8, 8), (9, 16)] {
            assert_eq!(t.attempt(c, at), Ok(n));
            let wait = Duration::from_secs(secs);
            assert_eq!(t.attempt(c, at), Err(wait), "try {n} imposes {secs} s");
            assert_eq!(
                t.attempt(c, at + wait / 2),
                Err(wait / 2),
                "a try during the wait is not counted"
            );
            at += wait;
        }
        let mut waited = Duration::ZERO;
        for _ in 0..40 {
            at += waited;
            t.attempt(c, at).unwrap();
            waited = t.attempt(c, at).unwrap_err();
        }
        assert_eq!(waited, Duration::from_secs(15 * 60), "capped");
    }

    #[test]
    fn other_clients_are_not_slowed_and_a_right_token_clears() {
        let t = Throttle::new(LoginThrottle::default());
        let now = Instant::now();
        let (a, b) = (client("203.0.113.7"), client("203.0.113.8"));
        for _ in 0..5 {
            t.attempt(a, now).unwrap();
        }
        assert!(t.attempt(a, now).is_err());
        assert_eq!(t.attempt(b, now), Ok(1));
        t.succeeded(a);
        assert_eq!(t.attempt(a, now), Ok(1), "counted afresh");
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        assert_eq!(client("2001:db8:1:2::1"), client("2001:db8:1:2:ffff::9"));
        assert_ne!(client("2001:db8:1:2::1"), client("2001:db8:1:3::1"));
        assert_eq!(client("::ffff:192.0.2.1"), client("192.0.2.1"));
        assert_eq!(client("2001:db8:1:2::1").to_string(), "2001:db8:1:2::/64");
    }

    #[test]
    fn the_table_is_bounded() {
        let policy = LoginThrottle {
            max_clients: 100,
            ..LoginThrottle::default()
        };
        let t = Throttle::new(policy);
        let now = Instant::now();
        for i in 0..10_000u32 {
            let c = Client::of(IpAddr::from(i.to_be_bytes()));
            t.attempt(c, now + Duration::from_millis(u64::from(i)))
                .unwrap();
        }
        assert_eq!(t.len(), 100);
        // The latest clients are the ones kept.
        let last = Client::of(IpAddr::from(9_999u32.to_be_bytes()));
        assert_eq!(t.attempt(last, now + Duration::from_secs(10)), Ok(2));
    }

    #[test]
    fn a_long_quiet_client_is_forgotten() {
        let t = Throttle::new(LoginThrottle::default());
        let c = client("203.0.113.7");
        let now = Instant::now();
        for _ in 0..5 {
            t.attempt(c, now).unwrap();
        }
        let later = now + Duration::from_secs(1 + 15 * 60);
        assert_eq!(t.attempt(c, later), Ok(1));
    }
}
