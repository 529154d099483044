//! The conformance cases, one module per area. Each case takes a
//! [`StoreFactory`](crate::StoreFactory), makes its own database, and
//! asserts effect counts at the destination and record states and tokens.
//! Every case here is listed in [`conformance_tests!`](crate::conformance_tests).

mod audit;
mod cancel;
mod crashes;
mod delivery;
mod input;
mod intercept;
mod protocol;
mod relay;
mod resolve;
mod retention;
mod stale;
mod support;
mod timing;
mod transitions;

pub use audit::*;
pub use cancel::*;
pub use crashes::*;
pub use delivery::*;
pub use input::*;
pub use protocol::*;
pub use relay::*;
pub use resolve::*;
pub use retention::*;
pub use stale::*;
pub use timing::*;
pub use transitions::*;
