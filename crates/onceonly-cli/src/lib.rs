//! Nothing to use: the `onceonly` binary is src/main.rs. This library
//! exists so the package's tests can depend on the package itself with the
//! `console` and `bench` features on (Cargo.toml, [dev-dependencies]).
#![forbid(unsafe_code)]
